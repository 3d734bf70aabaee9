if(DEFINED mpi_cli_test_TESTS)
  set_tests_properties(${mpi_cli_test_TESTS} PROPERTIES
    LABELS "cpu;cli" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
