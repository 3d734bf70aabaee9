file(REMOVE_RECURSE
  "CMakeFiles/checkpoint_test.dir/library/checkpoint_test.cpp.o"
  "CMakeFiles/checkpoint_test.dir/library/checkpoint_test.cpp.o.d"
  "checkpoint_test"
  "checkpoint_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/checkpoint_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
