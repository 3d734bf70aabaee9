# Empty custom commands generated dependencies file for tests_config.
# This may be replaced when dependencies are built.
