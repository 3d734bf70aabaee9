# Empty dependencies file for convert_test.
# This may be replaced when dependencies are built.
