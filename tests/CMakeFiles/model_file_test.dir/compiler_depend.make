# Empty compiler generated dependencies file for model_file_test.
# This may be replaced when dependencies are built.
