file(REMOVE_RECURSE
  "CMakeFiles/csr_weight_grad_test.dir/backend/csr_weight_grad_test.cpp.o"
  "CMakeFiles/csr_weight_grad_test.dir/backend/csr_weight_grad_test.cpp.o.d"
  "csr_weight_grad_test"
  "csr_weight_grad_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/csr_weight_grad_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
