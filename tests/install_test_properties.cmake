if(DEFINED install_test_TESTS)
  set_tests_properties(${install_test_TESTS} PROPERTIES
    LABELS "cpu;library" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
