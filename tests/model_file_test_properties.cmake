if(DEFINED model_file_test_TESTS)
  set_tests_properties(${model_file_test_TESTS} PROPERTIES
    LABELS "cpu;io" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
