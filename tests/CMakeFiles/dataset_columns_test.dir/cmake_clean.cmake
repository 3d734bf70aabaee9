file(REMOVE_RECURSE
  "CMakeFiles/dataset_columns_test.dir/io/dataset_columns_test.cpp.o"
  "CMakeFiles/dataset_columns_test.dir/io/dataset_columns_test.cpp.o.d"
  "dataset_columns_test"
  "dataset_columns_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/dataset_columns_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
