file(REMOVE_RECURSE
  "CMakeFiles/resource_errors_test.dir/cli/resource_errors_test.cpp.o"
  "CMakeFiles/resource_errors_test.dir/cli/resource_errors_test.cpp.o.d"
  "resource_errors_test"
  "resource_errors_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/resource_errors_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
