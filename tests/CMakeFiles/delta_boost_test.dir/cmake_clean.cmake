file(REMOVE_RECURSE
  "CMakeFiles/delta_boost_test.dir/backend/delta_boost_test.cpp.o"
  "CMakeFiles/delta_boost_test.dir/backend/delta_boost_test.cpp.o.d"
  "delta_boost_test"
  "delta_boost_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/delta_boost_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
