# Empty custom commands generated dependencies file for tests_cli.
# This may be replaced when dependencies are built.
