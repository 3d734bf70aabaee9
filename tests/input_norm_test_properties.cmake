if(DEFINED input_norm_test_TESTS)
  set_tests_properties(${input_norm_test_TESTS} PROPERTIES
    LABELS "cpu;engine" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
