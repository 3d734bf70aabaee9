if(DEFINED dataset_kinds_test_TESTS)
  set_tests_properties(${dataset_kinds_test_TESTS} PROPERTIES
    LABELS "cpu;io" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
