# Empty dependencies file for add_matrix_test.
# This may be replaced when dependencies are built.
