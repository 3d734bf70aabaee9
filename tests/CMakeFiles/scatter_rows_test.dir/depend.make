# Empty dependencies file for scatter_rows_test.
# This may be replaced when dependencies are built.
