# Empty custom commands generated dependencies file for tests_mpi.
# This may be replaced when dependencies are built.
