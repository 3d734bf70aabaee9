file(REMOVE_RECURSE
  "CMakeFiles/metrics_test.dir/engine/metrics_test.cpp.o"
  "CMakeFiles/metrics_test.dir/engine/metrics_test.cpp.o.d"
  "metrics_test"
  "metrics_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/metrics_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
