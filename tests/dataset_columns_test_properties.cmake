if(DEFINED dataset_columns_test_TESTS)
  set_tests_properties(${dataset_columns_test_TESTS} PROPERTIES
    LABELS "cpu;io" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
