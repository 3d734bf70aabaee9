file(REMOVE_RECURSE
  "CMakeFiles/train_options_cli_test.dir/cli/train_options_cli_test.cpp.o"
  "CMakeFiles/train_options_cli_test.dir/cli/train_options_cli_test.cpp.o.d"
  "train_options_cli_test"
  "train_options_cli_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/train_options_cli_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
