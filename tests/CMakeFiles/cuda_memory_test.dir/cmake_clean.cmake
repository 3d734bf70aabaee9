file(REMOVE_RECURSE
  "CMakeFiles/cuda_memory_test.dir/backend/cuda_memory_test.cpp.o"
  "CMakeFiles/cuda_memory_test.dir/backend/cuda_memory_test.cpp.o.d"
  "cuda_memory_test"
  "cuda_memory_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/cuda_memory_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
