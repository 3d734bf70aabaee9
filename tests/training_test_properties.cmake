if(DEFINED training_test_TESTS)
  set_tests_properties(${training_test_TESTS} PROPERTIES
    LABELS "cpu;engine" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
