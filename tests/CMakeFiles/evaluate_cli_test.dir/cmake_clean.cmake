file(REMOVE_RECURSE
  "CMakeFiles/evaluate_cli_test.dir/cli/evaluate_cli_test.cpp.o"
  "CMakeFiles/evaluate_cli_test.dir/cli/evaluate_cli_test.cpp.o.d"
  "evaluate_cli_test"
  "evaluate_cli_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/evaluate_cli_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
