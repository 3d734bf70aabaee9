file(REMOVE_RECURSE
  "CMakeFiles/config_reference_doc_test.dir/config/config_reference_doc_test.cpp.o"
  "CMakeFiles/config_reference_doc_test.dir/config/config_reference_doc_test.cpp.o.d"
  "config_reference_doc_test"
  "config_reference_doc_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/config_reference_doc_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
