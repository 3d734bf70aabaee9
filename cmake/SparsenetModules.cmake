# The library's modules (docs/architecture.md, "Modules"): one object library per folder of src/,
# sparsenet_<module>, whose links mirror the layering. A module's include path holds only its own
# folder and the folders of the modules it links, so an include that breaks the layering (io
# including engine/..., the backend including comm/...) fails to build, naming the file.
#
# How: every source includes another module's header as "<module>/<file>.h" from the src/ root.
# Instead of src/ itself, each module puts on its users' include path a folder of its own,
# ${PROJECT_BINARY_DIR}/modules/<module>/, that holds one link, <module> -> src/<module>; linking
# sparsenet_backend PUBLIC from sparsenet_engine is what lets the engine write "backend/...".
# The library target `sparsenet` is the archive of every module's objects (what the CLI, the tests,
# the shared library and the installed package link), so nothing outside src/ changes.

# sparsenet_module(<name> [PUBLIC <targets>...] [PRIVATE <targets>...]): sparsenet_<name> from
# src/<name>/**.cpp (the CUDA backend and the NCCL communicator are added by CMakeLists.txt when
# the build has them). PUBLIC: modules its headers include; PRIVATE: those only its sources do.
function(sparsenet_module name)
  set(view ${PROJECT_BINARY_DIR}/modules/${name})
  file(MAKE_DIRECTORY ${view})
  if(NOT EXISTS ${view}/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${view}/${name} SYMBOLIC)
  endif()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  list(FILTER sources EXCLUDE REGEX "/src/(backend/cuda/|comm/nccl_)")
  add_library(sparsenet_${name} OBJECT ${sources})
  target_include_directories(sparsenet_${name}
    PUBLIC ${view} ${PROJECT_SOURCE_DIR}/include)
  # Host-compiler flags for the C++ sources only (nvcc compiles the CUDA backend's .cu files).
  target_compile_options(sparsenet_${name}
    PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${SPARSENET_CXX_FLAGS}>")
  target_link_libraries(sparsenet_${name} ${ARGN} PRIVATE OpenMP::OpenMP_CXX)
  set_target_properties(sparsenet_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_sources(sparsenet PRIVATE $<TARGET_OBJECTS:sparsenet_${name}>)
endfunction()

# The kernels' headers (kernels/views.h, cuda_kernels.h, formulas/): the backend's and the
# engine's; kernels/ itself includes nothing from src/ (tests/library/layering_test.cpp).
add_library(sparsenet_kernel_headers INTERFACE)
target_include_directories(sparsenet_kernel_headers INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/kernels>)

sparsenet_module(common)
sparsenet_module(config PRIVATE JsonCpp::JsonCpp)
sparsenet_module(io PRIVATE sparsenet_common netCDF::netcdf sparsenet_hdf5)
sparsenet_module(data PRIVATE sparsenet_common)
sparsenet_module(backend PUBLIC sparsenet_common sparsenet_kernel_headers
  PRIVATE $<BUILD_INTERFACE:sparsenet_openblas>)
if(SPARSENET_HAVE_ONEDNN)
  # oneDNN for src/backend/cpu/bf16_matmul.cpp only.
  target_include_directories(sparsenet_backend SYSTEM PRIVATE ${SPARSENET_DNNL_INCLUDE_DIR})
  target_link_libraries(sparsenet_backend PRIVATE ${SPARSENET_DNNL_LIBRARY})
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/backend/cpu/bf16_matmul.cpp PROPERTIES
    COMPILE_DEFINITIONS SPARSENET_WITH_ONEDNN=1)
endif()
sparsenet_module(comm PRIVATE sparsenet_backend MPI::MPI_CXX)
sparsenet_module(engine PUBLIC sparsenet_backend sparsenet_comm sparsenet_io
  PRIVATE JsonCpp::JsonCpp $<BUILD_INTERFACE:sparsenet_openblas>)
if(SPARSENET_HAVE_HNSWLIB)
  # hnswlib (header-only) for src/engine/ann_hnsw.cpp only.
  target_include_directories(sparsenet_engine SYSTEM PRIVATE ${SPARSENET_HNSWLIB_INCLUDE_DIR})
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/engine/ann_hnsw.cpp PROPERTIES
    COMPILE_DEFINITIONS SPARSENET_WITH_HNSWLIB=1)
endif()
