# Empty dependencies file for backend_registry_test.
# This may be replaced when dependencies are built.
