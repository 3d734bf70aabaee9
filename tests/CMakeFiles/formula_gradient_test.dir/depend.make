# Empty dependencies file for formula_gradient_test.
# This may be replaced when dependencies are built.
