# Empty dependencies file for config_reference_doc_test.
# This may be replaced when dependencies are built.
