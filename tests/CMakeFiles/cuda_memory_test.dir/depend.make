# Empty dependencies file for cuda_memory_test.
# This may be replaced when dependencies are built.
