# Empty dependencies file for optimizer_rules_test.
# This may be replaced when dependencies are built.
