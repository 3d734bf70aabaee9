# Empty dependencies file for mpi_cli_test.
# This may be replaced when dependencies are built.
