# Empty compiler generated dependencies file for example_weights_test.
# This may be replaced when dependencies are built.
