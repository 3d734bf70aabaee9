# Empty compiler generated dependencies file for cli_test.
# This may be replaced when dependencies are built.
