file(REMOVE_RECURSE
  "CMakeFiles/topology_gradient_test.dir/gradient/topology_gradient_test.cpp.o"
  "CMakeFiles/topology_gradient_test.dir/gradient/topology_gradient_test.cpp.o.d"
  "topology_gradient_test"
  "topology_gradient_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/topology_gradient_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
