file(REMOVE_RECURSE
  "CMakeFiles/formula_gradient_test.dir/gradient/formula_gradient_test.cpp.o"
  "CMakeFiles/formula_gradient_test.dir/gradient/formula_gradient_test.cpp.o.d"
  "formula_gradient_test"
  "formula_gradient_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/formula_gradient_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
