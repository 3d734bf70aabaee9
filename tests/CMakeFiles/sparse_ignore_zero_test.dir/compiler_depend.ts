# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for sparse_ignore_zero_test.
