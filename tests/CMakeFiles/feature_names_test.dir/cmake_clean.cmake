file(REMOVE_RECURSE
  "CMakeFiles/feature_names_test.dir/library/feature_names_test.cpp.o"
  "CMakeFiles/feature_names_test.dir/library/feature_names_test.cpp.o.d"
  "feature_names_test"
  "feature_names_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/feature_names_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
