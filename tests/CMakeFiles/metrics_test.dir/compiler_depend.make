# Empty compiler generated dependencies file for metrics_test.
# This may be replaced when dependencies are built.
