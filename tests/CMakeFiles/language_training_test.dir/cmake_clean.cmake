file(REMOVE_RECURSE
  "CMakeFiles/language_training_test.dir/engine/language_training_test.cpp.o"
  "CMakeFiles/language_training_test.dir/engine/language_training_test.cpp.o.d"
  "language_training_test"
  "language_training_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/language_training_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
