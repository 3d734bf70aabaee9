# Empty dependencies file for checkpoint_cli_test.
# This may be replaced when dependencies are built.
