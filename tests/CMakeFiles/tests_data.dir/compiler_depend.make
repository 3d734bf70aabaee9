# Empty custom commands generated dependencies file for tests_data.
# This may be replaced when dependencies are built.
