file(REMOVE_RECURSE
  "CMakeFiles/model_file_test.dir/io/model_file_test.cpp.o"
  "CMakeFiles/model_file_test.dir/io/model_file_test.cpp.o.d"
  "model_file_test"
  "model_file_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/model_file_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
