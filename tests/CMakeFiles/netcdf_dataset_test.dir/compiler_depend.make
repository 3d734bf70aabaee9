# Empty compiler generated dependencies file for netcdf_dataset_test.
# This may be replaced when dependencies are built.
