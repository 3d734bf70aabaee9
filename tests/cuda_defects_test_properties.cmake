if(DEFINED cuda_defects_test_TESTS)
  set_tests_properties(${cuda_defects_test_TESTS} PROPERTIES
    LABELS "cuda;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
