# Empty compiler generated dependencies file for sparsenet_test_support.
# This may be replaced when dependencies are built.
