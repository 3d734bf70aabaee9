# Empty compiler generated dependencies file for convert_cli_test.
# This may be replaced when dependencies are built.
