# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for gpu_host_logic_test.
