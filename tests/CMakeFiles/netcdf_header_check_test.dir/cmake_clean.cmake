file(REMOVE_RECURSE
  "CMakeFiles/netcdf_header_check_test.dir/io/netcdf_header_check_test.cpp.o"
  "CMakeFiles/netcdf_header_check_test.dir/io/netcdf_header_check_test.cpp.o.d"
  "netcdf_header_check_test"
  "netcdf_header_check_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/netcdf_header_check_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
