if(DEFINED config_test_TESTS)
  set_tests_properties(${config_test_TESTS} PROPERTIES
    LABELS "cpu;config" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
