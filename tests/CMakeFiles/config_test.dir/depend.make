# Empty dependencies file for config_test.
# This may be replaced when dependencies are built.
