file(REMOVE_RECURSE
  "CMakeFiles/nccl_teardown_test.dir/engine/nccl_teardown_test.cpp.o"
  "CMakeFiles/nccl_teardown_test.dir/engine/nccl_teardown_test.cpp.o.d"
  "nccl_teardown_test"
  "nccl_teardown_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/nccl_teardown_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
