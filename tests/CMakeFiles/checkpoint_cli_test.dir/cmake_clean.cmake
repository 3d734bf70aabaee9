file(REMOVE_RECURSE
  "CMakeFiles/checkpoint_cli_test.dir/cli/checkpoint_cli_test.cpp.o"
  "CMakeFiles/checkpoint_cli_test.dir/cli/checkpoint_cli_test.cpp.o.d"
  "checkpoint_cli_test"
  "checkpoint_cli_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/checkpoint_cli_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
