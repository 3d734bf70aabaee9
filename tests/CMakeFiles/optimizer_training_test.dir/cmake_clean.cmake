file(REMOVE_RECURSE
  "CMakeFiles/optimizer_training_test.dir/engine/optimizer_training_test.cpp.o"
  "CMakeFiles/optimizer_training_test.dir/engine/optimizer_training_test.cpp.o.d"
  "optimizer_training_test"
  "optimizer_training_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/optimizer_training_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
