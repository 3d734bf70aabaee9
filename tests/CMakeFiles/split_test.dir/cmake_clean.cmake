file(REMOVE_RECURSE
  "CMakeFiles/split_test.dir/data/split_test.cpp.o"
  "CMakeFiles/split_test.dir/data/split_test.cpp.o.d"
  "split_test"
  "split_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/split_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
