# Empty dependencies file for fuzz_regression_test.
# This may be replaced when dependencies are built.
