file(REMOVE_RECURSE
  "CMakeFiles/sync_window_test.dir/engine/sync_window_test.cpp.o"
  "CMakeFiles/sync_window_test.dir/engine/sync_window_test.cpp.o.d"
  "sync_window_test"
  "sync_window_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/sync_window_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
