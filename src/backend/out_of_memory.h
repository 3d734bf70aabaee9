// Out-of-memory reporting shared by the backends and the CLI: what was being allocated, how much,
// what is already held, and what to change. Defined in backend.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "common/resources.h"
#include "sparsenet/error.h"

namespace sparsenet {

// The Error(kDevice) of a failed backend allocation. `memory` names the memory ("host memory",
// "device memory on cuda:0"); the message gives `what`, the size (bytes and human-readable), what
// the backend already holds (`held` bytes in `buffers` allocations of allocate()), `detail` when
// not empty (the runtime's error, the device's free memory), and kOutOfMemoryAdvice.
Error out_of_memory_error(const std::string& memory, size_t bytes, const char* what, size_t held,
                          size_t buffers, const std::string& detail = "");

// "; this process's address space is limited to 8.0 GiB (ulimit -v)" when RLIMIT_AS is set, else
// "".
std::string address_space_hint();

// Runs f(); a std::bad_alloc of a host allocation inside (a std::vector of datasets, of host
// copies of parameters, of a model file) becomes Error(kDevice) "out of host memory while
// <doing>: ..." with kOutOfMemoryAdvice, so library callers get the same named error as the CLI.
template <typename F>
auto host_memory_guard(const char* doing, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        throw Error(ErrorCategory::kDevice, std::string("out of host memory while ") + doing +
                                                ": a host allocation failed (std::bad_alloc)" +
                                                address_space_hint() + "; " + kOutOfMemoryAdvice);
    }
}

}  // namespace sparsenet
