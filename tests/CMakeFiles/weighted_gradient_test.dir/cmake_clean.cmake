file(REMOVE_RECURSE
  "CMakeFiles/weighted_gradient_test.dir/gradient/weighted_gradient_test.cpp.o"
  "CMakeFiles/weighted_gradient_test.dir/gradient/weighted_gradient_test.cpp.o.d"
  "weighted_gradient_test"
  "weighted_gradient_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/weighted_gradient_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
