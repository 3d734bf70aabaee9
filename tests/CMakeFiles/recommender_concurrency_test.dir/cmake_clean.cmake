file(REMOVE_RECURSE
  "CMakeFiles/recommender_concurrency_test.dir/library/recommender_concurrency_test.cpp.o"
  "CMakeFiles/recommender_concurrency_test.dir/library/recommender_concurrency_test.cpp.o.d"
  "recommender_concurrency_test"
  "recommender_concurrency_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/recommender_concurrency_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
