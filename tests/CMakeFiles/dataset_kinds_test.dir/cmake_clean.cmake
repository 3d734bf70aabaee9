file(REMOVE_RECURSE
  "CMakeFiles/dataset_kinds_test.dir/io/dataset_kinds_test.cpp.o"
  "CMakeFiles/dataset_kinds_test.dir/io/dataset_kinds_test.cpp.o.d"
  "dataset_kinds_test"
  "dataset_kinds_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/dataset_kinds_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
