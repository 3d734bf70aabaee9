# Empty compiler generated dependencies file for language_training_test.
# This may be replaced when dependencies are built.
