# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for indexed_training_test.
