# Empty dependencies file for output_delta_test.
# This may be replaced when dependencies are built.
