file(REMOVE_RECURSE
  "CMakeFiles/config_training_test.dir/config/config_training_test.cpp.o"
  "CMakeFiles/config_training_test.dir/config/config_training_test.cpp.o.d"
  "config_training_test"
  "config_training_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/config_training_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
