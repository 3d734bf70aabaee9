file(REMOVE_RECURSE
  "CMakeFiles/fuzz_regression_test.dir/io/fuzz_regression_test.cpp.o"
  "CMakeFiles/fuzz_regression_test.dir/io/fuzz_regression_test.cpp.o.d"
  "fuzz_regression_test"
  "fuzz_regression_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/fuzz_regression_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
