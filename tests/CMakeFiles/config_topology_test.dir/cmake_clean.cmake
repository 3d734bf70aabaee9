file(REMOVE_RECURSE
  "CMakeFiles/config_topology_test.dir/config/config_topology_test.cpp.o"
  "CMakeFiles/config_topology_test.dir/config/config_topology_test.cpp.o.d"
  "config_topology_test"
  "config_topology_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/config_topology_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
