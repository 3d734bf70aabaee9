# Empty compiler generated dependencies file for topology_gradient_test.
# This may be replaced when dependencies are built.
