# Empty compiler generated dependencies file for cuda_defects_test.
# This may be replaced when dependencies are built.
