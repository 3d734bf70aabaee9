if(DEFINED netcdf_dataset_test_TESTS)
  set_tests_properties(${netcdf_dataset_test_TESTS} PROPERTIES
    LABELS "cpu;io" ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
