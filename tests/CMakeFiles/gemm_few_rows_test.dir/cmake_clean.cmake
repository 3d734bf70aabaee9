file(REMOVE_RECURSE
  "CMakeFiles/gemm_few_rows_test.dir/backend/gemm_few_rows_test.cpp.o"
  "CMakeFiles/gemm_few_rows_test.dir/backend/gemm_few_rows_test.cpp.o.d"
  "gemm_few_rows_test"
  "gemm_few_rows_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/gemm_few_rows_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
