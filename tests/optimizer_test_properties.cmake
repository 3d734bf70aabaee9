if(DEFINED optimizer_test_TESTS)
  set_tests_properties(${optimizer_test_TESTS} PROPERTIES
    LABELS "cpu;cuda;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
