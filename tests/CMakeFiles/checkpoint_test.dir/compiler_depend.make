# Empty compiler generated dependencies file for checkpoint_test.
# This may be replaced when dependencies are built.
