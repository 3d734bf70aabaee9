if(DEFINED trainer_control_test_TESTS)
  set_tests_properties(${trainer_control_test_TESTS} PROPERTIES
    LABELS "cpu;library" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
