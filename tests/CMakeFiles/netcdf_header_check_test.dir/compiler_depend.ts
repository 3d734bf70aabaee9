# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for netcdf_header_check_test.
