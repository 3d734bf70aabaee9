# Empty dependencies file for delta_boost_test.
# This may be replaced when dependencies are built.
