# Empty compiler generated dependencies file for recommender_test.
# This may be replaced when dependencies are built.
