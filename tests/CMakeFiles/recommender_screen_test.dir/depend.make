# Empty dependencies file for recommender_screen_test.
# This may be replaced when dependencies are built.
