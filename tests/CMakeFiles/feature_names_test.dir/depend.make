# Empty dependencies file for feature_names_test.
# This may be replaced when dependencies are built.
