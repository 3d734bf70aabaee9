# Empty compiler generated dependencies file for cuda_training_test.
# This may be replaced when dependencies are built.
