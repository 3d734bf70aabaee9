file(REMOVE_RECURSE
  "CMakeFiles/backend_registry_test.dir/backend/backend_registry_test.cpp.o"
  "CMakeFiles/backend_registry_test.dir/backend/backend_registry_test.cpp.o.d"
  "backend_registry_test"
  "backend_registry_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/backend_registry_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
