file(REMOVE_RECURSE
  "CMakeFiles/top_k_test.dir/backend/top_k_test.cpp.o"
  "CMakeFiles/top_k_test.dir/backend/top_k_test.cpp.o.d"
  "top_k_test"
  "top_k_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/top_k_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
