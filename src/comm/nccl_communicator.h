// The NCCL communicator: the collectives of communicator.h on device buffers of a CUDA backend,
// enqueued on that backend's compute stream (so they run in call order with its ops, and a
// call returns before the transfer is done, like an op). Bootstrapped over MPI: rank 0 creates
// the NCCL unique id and broadcasts it over an MpiCommunicator, then every rank calls
// ncclCommInitRank on its backend's device. One process per GPU: each rank's backend must be on
// its own device (the caller picks it, e.g. cuda:<local rank>).
//
// libnccl.so.2 is loaded with dlopen at first use, never linked, as cuBLAS is (see
// src/backend/cuda/cuda_backend.cpp): linking it would map its 200 MB into every process that
// links libsparsenet, CPU-only ones included. Only compiled in builds with CUDA where nccl.h was
// found (SPARSENET_WITH_NCCL).
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace sparsenet::nccl {

// Whether NCCL's library (libnccl.so.<major of the nccl.h built against>) loads here and has
// every function the communicator calls. Never throws; *why (when not null) says what failed.
bool available(std::string* why);

// The NCCL communicator over every rank of MPI_COMM_WORLD for `backend`, which must be a CUDA
// backend (Error(kUsage) otherwise) and outlive the communicator. Collective: every rank calls
// it. Throws Error(kCommunication) when NCCL cannot be loaded or initialised.
std::shared_ptr<Communicator> make_communicator(Backend& backend);

}  // namespace sparsenet::nccl
