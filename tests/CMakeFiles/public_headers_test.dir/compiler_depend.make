# Empty compiler generated dependencies file for public_headers_test.
# This may be replaced when dependencies are built.
