# Empty compiler generated dependencies file for mpi_comm_test.
# This may be replaced when dependencies are built.
