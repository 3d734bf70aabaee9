file(REMOVE_RECURSE
  "CMakeFiles/convert_test.dir/data/convert_test.cpp.o"
  "CMakeFiles/convert_test.dir/data/convert_test.cpp.o.d"
  "convert_test"
  "convert_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/convert_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
