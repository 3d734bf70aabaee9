# Empty dependencies file for resource_errors_test.
# This may be replaced when dependencies are built.
