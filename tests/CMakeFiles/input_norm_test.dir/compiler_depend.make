# Empty compiler generated dependencies file for input_norm_test.
# This may be replaced when dependencies are built.
