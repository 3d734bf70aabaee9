file(REMOVE_RECURSE
  "CMakeFiles/device_auto_cli_test.dir/cli/device_auto_cli_test.cpp.o"
  "CMakeFiles/device_auto_cli_test.dir/cli/device_auto_cli_test.cpp.o.d"
  "device_auto_cli_test"
  "device_auto_cli_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/device_auto_cli_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
