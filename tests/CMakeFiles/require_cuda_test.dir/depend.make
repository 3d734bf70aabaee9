# Empty dependencies file for require_cuda_test.
# This may be replaced when dependencies are built.
