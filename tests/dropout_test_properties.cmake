if(DEFINED dropout_test_TESTS)
  set_tests_properties(${dropout_test_TESTS} PROPERTIES
    LABELS "cpu;cuda;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
