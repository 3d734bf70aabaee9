# Empty dependencies file for evaluate_cli_test.
# This may be replaced when dependencies are built.
