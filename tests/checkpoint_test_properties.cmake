if(DEFINED checkpoint_test_TESTS)
  set_tests_properties(${checkpoint_test_TESTS} PROPERTIES
    LABELS "cpu;library" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
