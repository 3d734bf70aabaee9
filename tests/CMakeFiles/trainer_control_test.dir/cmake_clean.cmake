file(REMOVE_RECURSE
  "CMakeFiles/trainer_control_test.dir/library/trainer_control_test.cpp.o"
  "CMakeFiles/trainer_control_test.dir/library/trainer_control_test.cpp.o.d"
  "trainer_control_test"
  "trainer_control_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/trainer_control_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
