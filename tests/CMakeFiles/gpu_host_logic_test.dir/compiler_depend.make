# Empty compiler generated dependencies file for gpu_host_logic_test.
# This may be replaced when dependencies are built.
