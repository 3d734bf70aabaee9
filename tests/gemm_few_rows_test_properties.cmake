if(DEFINED gemm_few_rows_test_TESTS)
  set_tests_properties(${gemm_few_rows_test_TESTS} PROPERTIES
    LABELS "cpu;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
