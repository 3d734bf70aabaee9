file(REMOVE_RECURSE
  "CMakeFiles/network_gradient_test.dir/gradient/network_gradient_test.cpp.o"
  "CMakeFiles/network_gradient_test.dir/gradient/network_gradient_test.cpp.o.d"
  "network_gradient_test"
  "network_gradient_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/network_gradient_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
