# Empty dependencies file for device_auto_cli_test.
# This may be replaced when dependencies are built.
