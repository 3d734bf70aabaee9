# Empty dependencies file for optimizer_training_test.
# This may be replaced when dependencies are built.
