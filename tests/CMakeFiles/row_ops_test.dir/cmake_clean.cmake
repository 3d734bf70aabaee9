file(REMOVE_RECURSE
  "CMakeFiles/row_ops_test.dir/backend/row_ops_test.cpp.o"
  "CMakeFiles/row_ops_test.dir/backend/row_ops_test.cpp.o.d"
  "row_ops_test"
  "row_ops_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/row_ops_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
