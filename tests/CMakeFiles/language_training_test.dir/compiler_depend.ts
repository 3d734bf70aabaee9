# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for language_training_test.
