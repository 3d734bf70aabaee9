# Empty dependencies file for sparsenet_mpi_test_main.
# This may be replaced when dependencies are built.
