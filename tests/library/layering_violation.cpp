// Not part of any program: the test Layering.AModuleCannotIncludeWhatItDoesNotLink
// (tests/CMakeLists.txt) compiles this file in a target that links only the io module
// (cmake/SparsenetModules.cmake) and passes when the compiler cannot find the engine's header.
#include "io/model_file.h"  // io's own header: found (a broken setup fails here instead)

#include "engine/network_impl.h"  // the engine's: io does not link it, so not found
