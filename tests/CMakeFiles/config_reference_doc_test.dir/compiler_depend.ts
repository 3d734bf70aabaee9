# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for config_reference_doc_test.
