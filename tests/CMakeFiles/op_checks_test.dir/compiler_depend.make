# Empty compiler generated dependencies file for op_checks_test.
# This may be replaced when dependencies are built.
