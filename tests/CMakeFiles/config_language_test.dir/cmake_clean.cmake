file(REMOVE_RECURSE
  "CMakeFiles/config_language_test.dir/config/config_language_test.cpp.o"
  "CMakeFiles/config_language_test.dir/config/config_language_test.cpp.o.d"
  "config_language_test"
  "config_language_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/config_language_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
