if(DEFINED netcdf_header_check_test_TESTS)
  set_tests_properties(${netcdf_header_check_test_TESTS} PROPERTIES
    LABELS "cpu;io" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
