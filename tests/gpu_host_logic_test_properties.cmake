if(DEFINED gpu_host_logic_test_TESTS)
  set_tests_properties(${gpu_host_logic_test_TESTS} PROPERTIES
    LABELS "cpu;backend" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
