if(DEFINED optimizer_rules_test_TESTS)
  set_tests_properties(${optimizer_rules_test_TESTS} PROPERTIES
    LABELS "cpu;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
