# Empty compiler generated dependencies file for topology_training_test.
# This may be replaced when dependencies are built.
