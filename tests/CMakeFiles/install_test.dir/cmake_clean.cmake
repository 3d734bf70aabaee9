file(REMOVE_RECURSE
  "CMakeFiles/install_test.dir/library/install_test.cpp.o"
  "CMakeFiles/install_test.dir/library/install_test.cpp.o.d"
  "install_test"
  "install_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/install_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
