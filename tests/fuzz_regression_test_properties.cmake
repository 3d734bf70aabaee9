if(DEFINED fuzz_regression_test_TESTS)
  set_tests_properties(${fuzz_regression_test_TESTS} PROPERTIES
    LABELS "cpu;io" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
