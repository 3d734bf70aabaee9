# Empty compiler generated dependencies file for mpi_model_parallel_test.
# This may be replaced when dependencies are built.
