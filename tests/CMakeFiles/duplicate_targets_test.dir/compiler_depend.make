# Empty compiler generated dependencies file for duplicate_targets_test.
# This may be replaced when dependencies are built.
