file(REMOVE_RECURSE
  "CMakeFiles/mpi_cli_test.dir/cli/mpi_cli_test.cpp.o"
  "CMakeFiles/mpi_cli_test.dir/cli/mpi_cli_test.cpp.o.d"
  "mpi_cli_test"
  "mpi_cli_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/mpi_cli_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
