file(REMOVE_RECURSE
  "CMakeFiles/mpi_model_parallel_test.dir/mpi/mpi_model_parallel_test.cpp.o"
  "CMakeFiles/mpi_model_parallel_test.dir/mpi/mpi_model_parallel_test.cpp.o.d"
  "mpi_model_parallel_test"
  "mpi_model_parallel_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/mpi_model_parallel_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
