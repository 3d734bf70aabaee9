# Empty compiler generated dependencies file for recommender_concurrency_test.
# This may be replaced when dependencies are built.
