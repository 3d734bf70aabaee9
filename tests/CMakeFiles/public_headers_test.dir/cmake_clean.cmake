file(REMOVE_RECURSE
  "CMakeFiles/public_headers_test.dir/library/public_headers_test.cpp.o"
  "CMakeFiles/public_headers_test.dir/library/public_headers_test.cpp.o.d"
  "public_headers_test"
  "public_headers_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/public_headers_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
