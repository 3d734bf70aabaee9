# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for model_file_test.
