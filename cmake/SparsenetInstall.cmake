# Installation (`cmake --install`): a relocatable package with
#   include/sparsenet/*.h                      the public API (C++17 standard library only)
#   lib/libsparsenet.so.<ver>, libsparsenet.a  the library, shared and static
#   bin/sparsenet                              the command-line tool
#   lib/cmake/sparsenet/                       find_package(sparsenet): sparsenet::sparsenet (shared)
#                                              and, with COMPONENTS static, sparsenet::sparsenet_static
#   lib/pkgconfig/sparsenet.pc                 pkg-config (shared; --static lists the private deps)
#   lib/pkgconfig/sparsenet-static.pc          pkg-config for the static library
# Every path inside is relative to the install prefix, so the tree may be moved or copied.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SPARSENET_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/sparsenet")

# The shared library is the whole static archive (compiled once, position independent; objects
# of other targets it holds, such as the CUDA backend's, included) linked with the archive's own
# dependencies, which it lists as link-only; users of it need none of them on their link line.
add_library(sparsenet_shared SHARED ${PROJECT_SOURCE_DIR}/cmake/sparsenet_shared.cpp)
target_link_libraries(sparsenet_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,sparsenet>")
target_include_directories(sparsenet_shared
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
         $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(sparsenet_shared PUBLIC cxx_std_17)
# 0.x: every minor version may change the ABI, so it is part of the soname.
set_target_properties(sparsenet_shared PROPERTIES
  OUTPUT_NAME sparsenet
  EXPORT_NAME sparsenet
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})

# The static library (the target everything in this tree links) as users see it: C++17, the
# public headers, and its private dependencies as link-only entries. OpenBLAS has no CMake
# package, so the installed config finds it and names it sparsenet::openblas.
target_include_directories(sparsenet PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(sparsenet PUBLIC cxx_std_17)
target_link_libraries(sparsenet INTERFACE $<INSTALL_INTERFACE:sparsenet::openblas>)
if(SPARSENET_HAVE_ONEDNN)  # likewise found by the config: sparsenet::dnnl
  target_link_libraries(sparsenet INTERFACE $<INSTALL_INTERFACE:sparsenet::dnnl>)
endif()
set_target_properties(sparsenet PROPERTIES EXPORT_NAME sparsenet_static)

install(TARGETS sparsenet_shared EXPORT sparsenetTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS sparsenet EXPORT sparsenetStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS sparsenet_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/sparsenet
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT sparsenetTargets NAMESPACE sparsenet:: DESTINATION ${SPARSENET_CMAKE_DIR})
install(EXPORT sparsenetStaticTargets NAMESPACE sparsenet:: DESTINATION ${SPARSENET_CMAKE_DIR})

# What the static library needs found again (the shared one needs nothing): exactly what this
# build linked.
set(SPARSENET_STATIC_DEPENDENCIES
  "find_dependency(OpenMP COMPONENTS CXX)\n  find_dependency(netCDF CONFIG)\n  find_dependency(jsoncpp CONFIG)\n  find_dependency(MPI COMPONENTS CXX)\n  find_dependency(ZLIB)")
if(SPARSENET_HAVE_CUDA)
  string(APPEND SPARSENET_STATIC_DEPENDENCIES "\n  find_dependency(CUDAToolkit)")
endif()
get_filename_component(SPARSENET_OPENBLAS_DIR "${SPARSENET_OPENBLAS_LIBRARY}" DIRECTORY)
# oneDNN (SPARSENET_ONEDNN): the static library's BF16 matmuls; the config finds libdnnl again.
set(SPARSENET_CONFIG_ONEDNN OFF)
set(SPARSENET_DNNL_DIR "")
if(SPARSENET_HAVE_ONEDNN)
  set(SPARSENET_CONFIG_ONEDNN ON)
  get_filename_component(SPARSENET_DNNL_DIR "${SPARSENET_DNNL_LIBRARY}" DIRECTORY)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/sparsenetConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sparsenetConfig.cmake
  INSTALL_DESTINATION ${SPARSENET_CMAKE_DIR})
# 0.x: a newer minor version is not compatible (see the soname above).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sparsenetConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sparsenetConfig.cmake
  ${PROJECT_BINARY_DIR}/sparsenetConfigVersion.cmake DESTINATION ${SPARSENET_CMAKE_DIR})

# pkg-config: the prefix is found from the .pc file's own place (${pcfiledir}), so the installed
# tree stays relocatable; an absolute CMAKE_INSTALL_LIBDIR gives up on that.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(SPARSENET_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SPARSENET_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(SPARSENET_PC_PREFIX "\${pcfiledir}")
  string(REPLACE "/" ";" _sparsenet_libdir_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  foreach(_part IN LISTS _sparsenet_libdir_parts)
    if(NOT _part STREQUAL "" AND NOT _part STREQUAL ".")
      string(APPEND SPARSENET_PC_PREFIX "/..")
    endif()
  endforeach()
  set(SPARSENET_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SPARSENET_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(SPARSENET_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# MPI: the libraries FindMPI found (libmpi_cxx, libmpi), as -L<dir> -l<name>.
set(_sparsenet_mpi_dirs "")
set(_sparsenet_mpi_libs "")
foreach(_lib IN LISTS MPI_CXX_LIBRARIES)
  if(_lib MATCHES "^(.*)/lib([^/]+)\\.(so|a)[.0-9]*$")
    list(APPEND _sparsenet_mpi_dirs "${CMAKE_MATCH_1}")
    string(APPEND _sparsenet_mpi_libs " -l${CMAKE_MATCH_2}")
  else()
    string(APPEND _sparsenet_mpi_libs " ${_lib}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _sparsenet_mpi_dirs)
set(SPARSENET_PC_MPI "")
foreach(_dir IN LISTS _sparsenet_mpi_dirs)
  string(APPEND SPARSENET_PC_MPI " -L${_dir}")
endforeach()
string(APPEND SPARSENET_PC_MPI "${_sparsenet_mpi_libs}")
# HDF5 (src/io/netcdf_chunks.cpp): Debian keeps it in a folder of its own (hdf5/serial).
get_filename_component(SPARSENET_HDF5_DIR "${SPARSENET_HDF5_LIBRARY}" DIRECTORY)
get_filename_component(SPARSENET_HDF5_NAME "${SPARSENET_HDF5_LIBRARY}" NAME_WE)
string(REGEX REPLACE "^lib" "" SPARSENET_HDF5_NAME "${SPARSENET_HDF5_NAME}")
set(SPARSENET_PC_DEPENDENCIES
  "${OpenMP_CXX_FLAGS} -lnetcdf -L${SPARSENET_HDF5_DIR} -l${SPARSENET_HDF5_NAME} -lz -ljsoncpp${SPARSENET_PC_MPI} -L${SPARSENET_OPENBLAS_DIR} -lopenblas -lpthread -lm")
if(SPARSENET_HAVE_ONEDNN)
  string(APPEND SPARSENET_PC_DEPENDENCIES " -L${SPARSENET_DNNL_DIR} -ldnnl")
endif()
if(SPARSENET_HAVE_CUDA)  # the CUDA backend in libsparsenet.a: the (shared) runtime; it dlopens cuBLAS
  string(APPEND SPARSENET_PC_DEPENDENCIES " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -ldl")
endif()
foreach(_pc sparsenet sparsenet-static)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${_pc}.pc.in ${PROJECT_BINARY_DIR}/${_pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${_pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
