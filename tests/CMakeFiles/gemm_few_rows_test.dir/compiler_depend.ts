# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for gemm_few_rows_test.
