# Empty custom commands generated dependencies file for tests_engine.
# This may be replaced when dependencies are built.
