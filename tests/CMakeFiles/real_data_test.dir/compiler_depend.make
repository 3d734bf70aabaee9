# Empty compiler generated dependencies file for real_data_test.
# This may be replaced when dependencies are built.
