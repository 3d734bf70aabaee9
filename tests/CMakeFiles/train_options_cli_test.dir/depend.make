# Empty dependencies file for train_options_cli_test.
# This may be replaced when dependencies are built.
