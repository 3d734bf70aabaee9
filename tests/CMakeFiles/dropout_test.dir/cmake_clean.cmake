file(REMOVE_RECURSE
  "CMakeFiles/dropout_test.dir/backend/dropout_test.cpp.o"
  "CMakeFiles/dropout_test.dir/backend/dropout_test.cpp.o.d"
  "dropout_test"
  "dropout_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/dropout_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
