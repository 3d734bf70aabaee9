file(REMOVE_RECURSE
  "CMakeFiles/mpi_comm_test.dir/mpi/mpi_comm_test.cpp.o"
  "CMakeFiles/mpi_comm_test.dir/mpi/mpi_comm_test.cpp.o.d"
  "mpi_comm_test"
  "mpi_comm_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/mpi_comm_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
