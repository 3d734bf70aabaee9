# Empty compiler generated dependencies file for dataset_columns_test.
# This may be replaced when dependencies are built.
