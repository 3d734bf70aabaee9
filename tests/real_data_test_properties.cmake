if(DEFINED real_data_test_TESTS)
  set_tests_properties(${real_data_test_TESTS} PROPERTIES
    LABELS "cpu;data" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
