file(REMOVE_RECURSE
  "CMakeFiles/netcdf_dataset_test.dir/io/netcdf_dataset_test.cpp.o"
  "CMakeFiles/netcdf_dataset_test.dir/io/netcdf_dataset_test.cpp.o.d"
  "netcdf_dataset_test"
  "netcdf_dataset_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/netcdf_dataset_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
