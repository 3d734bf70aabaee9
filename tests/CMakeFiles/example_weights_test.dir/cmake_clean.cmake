file(REMOVE_RECURSE
  "CMakeFiles/example_weights_test.dir/engine/example_weights_test.cpp.o"
  "CMakeFiles/example_weights_test.dir/engine/example_weights_test.cpp.o.d"
  "example_weights_test"
  "example_weights_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/example_weights_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
