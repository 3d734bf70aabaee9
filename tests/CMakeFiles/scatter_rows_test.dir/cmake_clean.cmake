file(REMOVE_RECURSE
  "CMakeFiles/scatter_rows_test.dir/backend/scatter_rows_test.cpp.o"
  "CMakeFiles/scatter_rows_test.dir/backend/scatter_rows_test.cpp.o.d"
  "scatter_rows_test"
  "scatter_rows_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/scatter_rows_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
