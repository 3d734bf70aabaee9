file(REMOVE_RECURSE
  "CMakeFiles/sparsenet_mpi_test_main.dir/mpi/support/mpi_test_main.cpp.o"
  "CMakeFiles/sparsenet_mpi_test_main.dir/mpi/support/mpi_test_main.cpp.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/sparsenet_mpi_test_main.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
