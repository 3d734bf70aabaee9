# Empty compiler generated dependencies file for netcdf_header_check_test.
# This may be replaced when dependencies are built.
