if(DEFINED sparse_ignore_zero_test_TESTS)
  set_tests_properties(${sparse_ignore_zero_test_TESTS} PROPERTIES
    LABELS "cpu;engine" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
