file(REMOVE_RECURSE
  "CMakeFiles/indexed_training_test.dir/engine/indexed_training_test.cpp.o"
  "CMakeFiles/indexed_training_test.dir/engine/indexed_training_test.cpp.o.d"
  "indexed_training_test"
  "indexed_training_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/indexed_training_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
