# Empty dependencies file for split_test.
# This may be replaced when dependencies are built.
