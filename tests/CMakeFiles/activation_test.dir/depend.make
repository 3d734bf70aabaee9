# Empty dependencies file for activation_test.
# This may be replaced when dependencies are built.
