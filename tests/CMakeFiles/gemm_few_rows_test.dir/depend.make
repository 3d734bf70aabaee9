# Empty dependencies file for gemm_few_rows_test.
# This may be replaced when dependencies are built.
