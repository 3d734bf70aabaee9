# Empty compiler generated dependencies file for dropout_test.
# This may be replaced when dependencies are built.
