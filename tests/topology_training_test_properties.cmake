if(DEFINED topology_training_test_TESTS)
  set_tests_properties(${topology_training_test_TESTS} PROPERTIES
    LABELS "cpu;engine" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
