file(REMOVE_RECURSE
  "CMakeFiles/topology_training_test.dir/engine/topology_training_test.cpp.o"
  "CMakeFiles/topology_training_test.dir/engine/topology_training_test.cpp.o.d"
  "topology_training_test"
  "topology_training_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/topology_training_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
