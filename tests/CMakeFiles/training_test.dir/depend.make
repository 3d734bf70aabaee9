# Empty dependencies file for training_test.
# This may be replaced when dependencies are built.
