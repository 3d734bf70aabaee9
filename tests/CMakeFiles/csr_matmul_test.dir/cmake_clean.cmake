file(REMOVE_RECURSE
  "CMakeFiles/csr_matmul_test.dir/backend/csr_matmul_test.cpp.o"
  "CMakeFiles/csr_matmul_test.dir/backend/csr_matmul_test.cpp.o.d"
  "csr_matmul_test"
  "csr_matmul_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/csr_matmul_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
