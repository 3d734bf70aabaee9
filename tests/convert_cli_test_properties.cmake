if(DEFINED convert_cli_test_TESTS)
  set_tests_properties(${convert_cli_test_TESTS} PROPERTIES
    LABELS "cpu;cli" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
