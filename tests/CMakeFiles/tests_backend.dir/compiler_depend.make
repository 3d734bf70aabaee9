# Empty custom commands generated dependencies file for tests_backend.
# This may be replaced when dependencies are built.
