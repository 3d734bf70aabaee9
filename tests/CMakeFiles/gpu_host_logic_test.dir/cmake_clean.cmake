file(REMOVE_RECURSE
  "CMakeFiles/gpu_host_logic_test.dir/backend/gpu_host_logic_test.cpp.o"
  "CMakeFiles/gpu_host_logic_test.dir/backend/gpu_host_logic_test.cpp.o.d"
  "gpu_host_logic_test"
  "gpu_host_logic_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/gpu_host_logic_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
