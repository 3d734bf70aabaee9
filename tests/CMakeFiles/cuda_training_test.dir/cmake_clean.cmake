file(REMOVE_RECURSE
  "CMakeFiles/cuda_training_test.dir/engine/cuda_training_test.cpp.o"
  "CMakeFiles/cuda_training_test.dir/engine/cuda_training_test.cpp.o.d"
  "cuda_training_test"
  "cuda_training_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/cuda_training_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
