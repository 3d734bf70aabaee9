if(DEFINED formula_gradient_test_TESTS)
  set_tests_properties(${formula_gradient_test_TESTS} PROPERTIES
    LABELS "cpu;gradient" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
