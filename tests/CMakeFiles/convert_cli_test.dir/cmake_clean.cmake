file(REMOVE_RECURSE
  "CMakeFiles/convert_cli_test.dir/cli/convert_cli_test.cpp.o"
  "CMakeFiles/convert_cli_test.dir/cli/convert_cli_test.cpp.o.d"
  "convert_cli_test"
  "convert_cli_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/convert_cli_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
