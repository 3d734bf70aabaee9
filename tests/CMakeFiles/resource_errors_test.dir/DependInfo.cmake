
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/tests/cli/resource_errors_test.cpp" "tests/CMakeFiles/resource_errors_test.dir/cli/resource_errors_test.cpp.o" "gcc" "tests/CMakeFiles/resource_errors_test.dir/cli/resource_errors_test.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/tests/CMakeFiles/sparsenet_test_support.dir/DependInfo.cmake"
  "/work/main/CMakeFiles/sparsenet.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
