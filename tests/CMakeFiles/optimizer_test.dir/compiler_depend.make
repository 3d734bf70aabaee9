# Empty compiler generated dependencies file for optimizer_test.
# This may be replaced when dependencies are built.
