file(REMOVE_RECURSE
  "CMakeFiles/regularizer_test.dir/backend/regularizer_test.cpp.o"
  "CMakeFiles/regularizer_test.dir/backend/regularizer_test.cpp.o.d"
  "regularizer_test"
  "regularizer_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/regularizer_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
