file(REMOVE_RECURSE
  "CMakeFiles/cuda_defects_test.dir/backend/cuda_defects_test.cpp.o"
  "CMakeFiles/cuda_defects_test.dir/backend/cuda_defects_test.cpp.o.d"
  "cuda_defects_test"
  "cuda_defects_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/cuda_defects_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
