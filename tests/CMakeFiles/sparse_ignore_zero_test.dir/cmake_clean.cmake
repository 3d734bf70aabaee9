file(REMOVE_RECURSE
  "CMakeFiles/sparse_ignore_zero_test.dir/engine/sparse_ignore_zero_test.cpp.o"
  "CMakeFiles/sparse_ignore_zero_test.dir/engine/sparse_ignore_zero_test.cpp.o.d"
  "sparse_ignore_zero_test"
  "sparse_ignore_zero_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/sparse_ignore_zero_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
