# Empty dependencies file for csr_matmul_test.
# This may be replaced when dependencies are built.
