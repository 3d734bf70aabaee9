# Empty compiler generated dependencies file for gemm_test.
# This may be replaced when dependencies are built.
