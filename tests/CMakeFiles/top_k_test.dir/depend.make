# Empty dependencies file for top_k_test.
# This may be replaced when dependencies are built.
