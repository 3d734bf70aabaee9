file(REMOVE_RECURSE
  "CMakeFiles/input_norm_test.dir/engine/input_norm_test.cpp.o"
  "CMakeFiles/input_norm_test.dir/engine/input_norm_test.cpp.o.d"
  "input_norm_test"
  "input_norm_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/input_norm_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
