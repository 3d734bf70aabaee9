// The shared library's only own source, and an empty one: libsparsenet.so is the whole static
// archive (every object, CUDA ones included when built) linked as a shared object, and CMake
// wants at least one source per library (cmake/SparsenetInstall.cmake).
