
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/tests/support/cuda_test_policy.cpp" "tests/CMakeFiles/sparsenet_test_support.dir/support/cuda_test_policy.cpp.o" "gcc" "tests/CMakeFiles/sparsenet_test_support.dir/support/cuda_test_policy.cpp.o.d"
  "/work/main/tests/support/test_support.cpp" "tests/CMakeFiles/sparsenet_test_support.dir/support/test_support.cpp.o" "gcc" "tests/CMakeFiles/sparsenet_test_support.dir/support/test_support.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/CMakeFiles/sparsenet.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
