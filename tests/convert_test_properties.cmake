if(DEFINED convert_test_TESTS)
  set_tests_properties(${convert_test_TESTS} PROPERTIES
    LABELS "cpu;data" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
