if(DEFINED sync_window_test_TESTS)
  set_tests_properties(${sync_window_test_TESTS} PROPERTIES
    LABELS "cpu;engine" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
