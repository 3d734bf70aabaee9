# Empty compiler generated dependencies file for generate_test.
# This may be replaced when dependencies are built.
