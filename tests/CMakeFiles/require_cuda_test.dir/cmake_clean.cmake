file(REMOVE_RECURSE
  "CMakeFiles/require_cuda_test.dir/backend/require_cuda_test.cpp.o"
  "CMakeFiles/require_cuda_test.dir/backend/require_cuda_test.cpp.o.d"
  "require_cuda_test"
  "require_cuda_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/require_cuda_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
