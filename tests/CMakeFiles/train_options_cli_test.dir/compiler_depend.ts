# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for train_options_cli_test.
