// The GPU that "auto" and "cuda" (without an index) mean for this process: GPU 0 for one
// process, the rank's own under mpirun (comm/node_rank.h chooses it; include/sparsenet/
// rank_device.h). Kept out of backend.h so that the op table's users do not see it.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace sparsenet {

struct DefaultGpu {
    int index = 0;
    // Why this GPU, for the "device auto -> cuda:N (...)" line; empty for one process.
    std::string note;
};

// make_backend(device, threads) with "auto" and "cuda" meaning GPU gpu.index instead of GPU 0.
// "auto" keeps its fallback: the CPU, with the reason, when that GPU is missing or not usable.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      const DefaultGpu& gpu);

// prepare_backend_device for the same choice.
void prepare_backend_device(const std::string& device, const DefaultGpu& gpu);

// The CUDA devices the runtime reports (0 in a build without CUDA, or without a driver); never
// throws.
int cuda_device_count();

}  // namespace sparsenet
