file(REMOVE_RECURSE
  "CMakeFiles/output_delta_test.dir/backend/output_delta_test.cpp.o"
  "CMakeFiles/output_delta_test.dir/backend/output_delta_test.cpp.o.d"
  "output_delta_test"
  "output_delta_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/output_delta_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
