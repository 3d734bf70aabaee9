# Empty custom commands generated dependencies file for tests_gradient.
# This may be replaced when dependencies are built.
