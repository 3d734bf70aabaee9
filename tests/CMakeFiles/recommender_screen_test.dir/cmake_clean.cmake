file(REMOVE_RECURSE
  "CMakeFiles/recommender_screen_test.dir/library/recommender_screen_test.cpp.o"
  "CMakeFiles/recommender_screen_test.dir/library/recommender_screen_test.cpp.o.d"
  "recommender_screen_test"
  "recommender_screen_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/recommender_screen_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
