if(DEFINED op_checks_test_TESTS)
  set_tests_properties(${op_checks_test_TESTS} PROPERTIES
    LABELS "cpu;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
