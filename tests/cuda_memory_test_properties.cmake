if(DEFINED cuda_memory_test_TESTS)
  set_tests_properties(${cuda_memory_test_TESTS} PROPERTIES
    LABELS "cuda;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
