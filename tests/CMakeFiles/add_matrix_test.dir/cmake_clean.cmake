file(REMOVE_RECURSE
  "CMakeFiles/add_matrix_test.dir/backend/add_matrix_test.cpp.o"
  "CMakeFiles/add_matrix_test.dir/backend/add_matrix_test.cpp.o.d"
  "add_matrix_test"
  "add_matrix_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/add_matrix_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
