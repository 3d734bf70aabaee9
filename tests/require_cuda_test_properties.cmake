if(DEFINED require_cuda_test_TESTS)
  set_tests_properties(${require_cuda_test_TESTS} PROPERTIES
    LABELS "cpu;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
