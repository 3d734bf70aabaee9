# Empty dependencies file for nccl_teardown_test.
# This may be replaced when dependencies are built.
