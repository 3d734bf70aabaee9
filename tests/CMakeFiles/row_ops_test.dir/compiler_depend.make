# Empty compiler generated dependencies file for row_ops_test.
# This may be replaced when dependencies are built.
