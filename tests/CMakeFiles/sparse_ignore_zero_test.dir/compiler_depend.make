# Empty compiler generated dependencies file for sparse_ignore_zero_test.
# This may be replaced when dependencies are built.
