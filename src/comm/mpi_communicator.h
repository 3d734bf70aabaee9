// The MPI communicator: the collectives of communicator.h over a duplicate of MPI_COMM_WORLD.
//
// Memory: on the CPU backend (backend.name() == "cpu") the buffers are host memory and go to MPI
// as they are. On any other backend they are staged: synchronize(), download into a host
// staging buffer, the MPI call on host memory, upload. The staging buffer belongs to the
// communicator and only grows (a warm communicator allocates nothing per call).
//
// Errors: the duplicate communicator has MPI_ERRORS_RETURN, so a failed call returns and is
// thrown as Error(kCommunication, "MPI_Allgather failed on rank R of N: <MPI_Error_string>")
// instead of aborting the job; argument misuse (a root out of range) is Error(kUsage).
//
// Large counts: MPI counts are int. A transfer of more than max_chunk() elements (INT_MAX by
// default) is split into chunks (mpi_chunks); every rank splits the same way because the counts
// are the same on every rank. Split all_gather / gather / reduce_scatter use one broadcast /
// send / reduce per rank and chunk, which place each rank's block straight where it belongs.
//
// The MPI environment is process-wide (mpi_ensure_initialized): MPI_Init_thread with
// MPI_THREAD_FUNNELED on first use unless MPI is already initialised (by the program or a test
// main, which then also finalises it), MPI_Finalize at process exit only when the library
// initialised it. Threading: MPI calls come from one thread, the one that initialised MPI; a
// communicator runs one call at a time (like a backend).
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace sparsenet {

// One MPI call's part of a transfer of `count` elements: elements [offset, offset + count).
struct MpiChunk {
    size_t offset = 0;
    int count = 0;
};

// [0, count) in consecutive chunks of max_count elements (the last one shorter); max_count is
// clamped to [1, INT_MAX]. count == 0 gives no chunk.
std::vector<MpiChunk> mpi_chunks(size_t count, size_t max_count = INT_MAX);

// Throws Error(kCommunication, "<call> failed on rank <rank> of <size>: <MPI_Error_string(rc)>")
// unless rc == MPI_SUCCESS.
void mpi_check(int rc, const std::string& call, int rank, int size);

// Initialises MPI for this process unless it already is (MPI_Initialized): MPI_Init_thread
// (MPI_THREAD_FUNNELED), and MPI_Finalize registered with std::atexit. Throws
// Error(kCommunication) when MPI was already finalised (MPI allows one initialisation per
// process) or initialisation fails. Thread-safe.
void mpi_ensure_initialized();

// True when mpi_ensure_initialized initialised MPI (and so finalises it at exit); false when the
// program did, or MPI is not initialised.
bool mpi_initialized_by_library();

class MpiCommunicator final : public Communicator {
  public:
    // kAuto: stage unless the backend is the CPU backend. kAlways: stage host memory too (tests
    // run the device path on the CPU backend with it).
    enum class Staging { kAuto, kAlways };

    // Buffers are memory of `backend` (staged through host memory unless it is the CPU
    // backend); `backend` must outlive the communicator. Initialises MPI if needed.
    explicit MpiCommunicator(Backend& backend, Staging staging = Staging::kAuto);
    // Buffers are host memory (no backend): NCCL's bootstrap, host-side values.
    MpiCommunicator();
    ~MpiCommunicator() override;
    MpiCommunicator(const MpiCommunicator&) = delete;
    MpiCommunicator& operator=(const MpiCommunicator&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string name() const override { return "mpi"; }

    void all_gather(const void* send, void* recv, size_t count, CommType type) override;
    void reduce_scatter(const void* send, void* recv, size_t count, CommType type,
                        CommOp op) override;
    void all_reduce(void* data, size_t count, CommType type, CommOp op) override;
    void broadcast(void* data, size_t count, CommType type, int root) override;
    void gather(const void* send, void* recv, size_t count, CommType type, int root) override;
    void barrier() override;

    // MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job.

    // This communicator's duplicate of MPI_COMM_WORLD (MPI_ERRORS_RETURN set on it).
    MPI_Comm comm() const { return comm_; }

    // The largest element count of one MPI call; larger transfers are split. Tests lower it to
    // run the split paths on small buffers. Every rank must set the same value.
    size_t max_chunk() const { return max_chunk_; }
    void set_max_chunk(size_t elements);

  private:
    void init();
    void check(int rc, const char* call) const { mpi_check(rc, call, rank_, size_); }
    void check_root(const char* what, int root) const;
    unsigned char* staging(size_t bytes);

    // The collectives on host memory.
    void all_gather_host(const void* send, void* recv, size_t count, CommType type);
    void reduce_scatter_host(const void* send, void* recv, size_t count, CommType type, CommOp op);
    void all_reduce_host(void* data, size_t count, CommType type, CommOp op);
    void broadcast_host(void* data, size_t count, CommType type, int root);
    void gather_host(const void* send, void* recv, size_t count, CommType type, int root);

    Backend* backend_ = nullptr;  // nullptr or the CPU backend: buffers are host memory
    bool host_memory_ = true;
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
    size_t max_chunk_ = INT_MAX;
    std::vector<unsigned char> staging_;
};

}  // namespace sparsenet
