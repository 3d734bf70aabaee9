file(REMOVE_RECURSE
  "CMakeFiles/op_checks_test.dir/backend/op_checks_test.cpp.o"
  "CMakeFiles/op_checks_test.dir/backend/op_checks_test.cpp.o.d"
  "op_checks_test"
  "op_checks_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/op_checks_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
