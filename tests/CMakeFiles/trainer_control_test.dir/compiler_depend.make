# Empty compiler generated dependencies file for trainer_control_test.
# This may be replaced when dependencies are built.
