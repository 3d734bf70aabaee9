# Empty custom commands generated dependencies file for tests_io.
# This may be replaced when dependencies are built.
