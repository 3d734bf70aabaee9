file(REMOVE_RECURSE
  "CMakeFiles/duplicate_targets_test.dir/backend/duplicate_targets_test.cpp.o"
  "CMakeFiles/duplicate_targets_test.dir/backend/duplicate_targets_test.cpp.o.d"
  "duplicate_targets_test"
  "duplicate_targets_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/duplicate_targets_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
