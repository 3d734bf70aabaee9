# Empty compiler generated dependencies file for install_test.
# This may be replaced when dependencies are built.
