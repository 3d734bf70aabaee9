# Empty custom commands generated dependencies file for tests_library.
# This may be replaced when dependencies are built.
