# Empty dependencies file for config_training_test.
# This may be replaced when dependencies are built.
