file(REMOVE_RECURSE
  "CMakeFiles/gemm_test.dir/backend/gemm_test.cpp.o"
  "CMakeFiles/gemm_test.dir/backend/gemm_test.cpp.o.d"
  "gemm_test"
  "gemm_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/gemm_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
