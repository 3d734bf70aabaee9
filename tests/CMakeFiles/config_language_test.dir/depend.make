# Empty dependencies file for config_language_test.
# This may be replaced when dependencies are built.
