# Empty dependencies file for communicator_test.
# This may be replaced when dependencies are built.
