# Empty dependencies file for indexed_training_test.
# This may be replaced when dependencies are built.
