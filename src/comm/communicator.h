// Communicator: the collectives that model parallelism needs, on the memory of one backend.
// Implementations: local (one rank, copies only), MPI (host buffers; device buffers are staged
// through host memory), NCCL (device buffers on the CUDA backend's stream, bootstrapped over
// MPI). The engine calls these only; it never names MPI or NCCL (docs/parallelism.md).
//
// Conventions:
// - Every call is collective: every rank of the communicator makes it, in the same order, with
//   the same counts and types.
// - Buffers are memory of the backend the communicator was made for (host memory for the CPU
//   backend, device memory for CUDA); send and receive buffers never overlap unless an argument
//   says "in place".
// - Counts are elements of `type`; all_gather and reduce_scatter move equal blocks per rank
//   (callers pad uneven shards to the largest block), as NCCL requires.
// - Errors (a peer that died, a transport failure) throw sparsenet::Error(kCommunication)
//   naming the collective; the program decides whether to end the job (the CLI calls MPI_Abort:
//   a rank that returned from main instead would leave the others waiting in a collective).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sparsenet/job.h"  // launched_with_mpi, job_rank, job_size, job_rank_label

namespace sparsenet {

class Backend;

enum class CommType { kFloat32, kFloat64, kUint32, kUint64, kByte };
enum class CommOp { kSum, kMax, kMin };

size_t comm_type_size(CommType type);

class Communicator {
  public:
    virtual ~Communicator() = default;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string name() const = 0;  // "local", "mpi", "nccl"

    // recv = the ranks' send blocks in rank order: recv[r * count .. (r + 1) * count) is rank r's
    // send[0 .. count). recv holds size() * count elements.
    virtual void all_gather(const void* send, void* recv, size_t count, CommType type) = 0;

    // send holds size() blocks of count elements; rank r receives in recv[0 .. count) the
    // reduction over ranks of their block r.
    virtual void reduce_scatter(const void* send, void* recv, size_t count, CommType type,
                                CommOp op) = 0;

    // In place: data[0 .. count) := the reduction over ranks.
    virtual void all_reduce(void* data, size_t count, CommType type, CommOp op) = 0;

    // In place: every rank's data[0 .. count) := root's.
    virtual void broadcast(void* data, size_t count, CommType type, int root) = 0;

    // recv (significant on root only, size() * count elements) = the ranks' send blocks in rank
    // order, as all_gather, but only root receives. Saving a split model uses it.
    virtual void gather(const void* send, void* recv, size_t count, CommType type, int root) = 0;

    virtual void barrier() = 0;
};

// The process's communicator choice. `kind`: "auto" (MPI when this process was started by an MPI
// launcher with more than one rank, with NCCL instead when the backend is CUDA and NCCL was
// built; local otherwise), "local", "mpi", "nccl" (case-insensitive); anything else, or "nccl"
// without a CUDA backend or without NCCL in the build, is Error(kUsage). "mpi" outside a launcher
// is MPI's singleton mode (one rank). The MPI implementations share one MPI_COMM_WORLD,
// initialised on first use (unless the program did) and then finalised at exit; MPI calls come
// from the thread that initialised it (docs/parallelism.md, "Communicators").
std::shared_ptr<Communicator> make_communicator(const std::string& kind, Backend& backend);

}  // namespace sparsenet
