# Empty compiler generated dependencies file for dataset_kinds_test.
# This may be replaced when dependencies are built.
