# Empty dependencies file for weighted_gradient_test.
# This may be replaced when dependencies are built.
