// One GPU per rank under mpirun: what "auto" and "cuda" mean for this process
// (include/sparsenet/rank_device.h has the public part: node_local_rank, device_for_rank).
#pragma once

#include <string>

#include "backend/default_gpu.h"
#include "sparsenet/rank_device.h"

namespace sparsenet {

// The default GPU (backend/default_gpu.h) of this process for NetworkOptions `device` and
// `share_gpus`: GPU 0 for one process, exactly as before; under an MPI launcher with more than
// one rank, the GPU of its node-local rank (gpu_for_rank), with a note saying so. Throws
// gpu_for_rank's refusal before anything is allocated. Neither reads the environment nor
// initialises MPI for "cpu", "cuda:N", or a node without a GPU.
DefaultGpu rank_default_gpu(const std::string& device, bool share_gpus);

// The MPI shared-memory split itself, uncached (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) of
// MPI_COMM_WORLD; initialises MPI if needed; collective). node_local_rank() calls it once.
NodeLocalRank mpi_node_local_rank();

}  // namespace sparsenet
