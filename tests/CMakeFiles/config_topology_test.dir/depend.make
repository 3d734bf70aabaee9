# Empty dependencies file for config_topology_test.
# This may be replaced when dependencies are built.
