file(REMOVE_RECURSE
  "CMakeFiles/recommender_test.dir/library/recommender_test.cpp.o"
  "CMakeFiles/recommender_test.dir/library/recommender_test.cpp.o.d"
  "recommender_test"
  "recommender_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/recommender_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
