file(REMOVE_RECURSE
  "CMakeFiles/activation_test.dir/backend/activation_test.cpp.o"
  "CMakeFiles/activation_test.dir/backend/activation_test.cpp.o.d"
  "activation_test"
  "activation_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/activation_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
