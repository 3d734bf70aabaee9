file(REMOVE_RECURSE
  "CMakeFiles/config_test.dir/config/config_test.cpp.o"
  "CMakeFiles/config_test.dir/config/config_test.cpp.o.d"
  "config_test"
  "config_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/config_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
