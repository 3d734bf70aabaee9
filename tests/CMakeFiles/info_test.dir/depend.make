# Empty dependencies file for info_test.
# This may be replaced when dependencies are built.
