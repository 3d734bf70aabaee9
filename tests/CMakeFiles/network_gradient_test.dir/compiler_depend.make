# Empty compiler generated dependencies file for network_gradient_test.
# This may be replaced when dependencies are built.
