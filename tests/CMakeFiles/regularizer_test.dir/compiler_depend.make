# Empty compiler generated dependencies file for regularizer_test.
# This may be replaced when dependencies are built.
