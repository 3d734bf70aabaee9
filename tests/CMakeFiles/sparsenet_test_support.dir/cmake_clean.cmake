file(REMOVE_RECURSE
  "CMakeFiles/sparsenet_test_support.dir/support/cuda_test_policy.cpp.o"
  "CMakeFiles/sparsenet_test_support.dir/support/cuda_test_policy.cpp.o.d"
  "CMakeFiles/sparsenet_test_support.dir/support/test_support.cpp.o"
  "CMakeFiles/sparsenet_test_support.dir/support/test_support.cpp.o.d"
  "libsparsenet_test_support.a"
  "libsparsenet_test_support.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/sparsenet_test_support.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
