# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for device_auto_cli_test.
