if(DEFINED cuda_training_test_TESTS)
  set_tests_properties(${cuda_training_test_TESTS} PROPERTIES
    LABELS "cuda;engine" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
