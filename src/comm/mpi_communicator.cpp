// The MPI communicator and the process-wide MPI environment (mpi_communicator.h).
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backend/backend.h"
#include "sparsenet/error.h"

namespace sparsenet {

namespace {

// ---- the process-wide environment ----

std::mutex g_init_mutex;
bool g_initialized_by_library = false;  // written under g_init_mutex

// Registered with std::atexit by the initialisation. Communicators still alive then (held by
// objects with static storage, or leaked) skip MPI_Comm_free when they are destroyed later.
void finalize_at_exit() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

std::string error_string(int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) {
        return "MPI error code " + std::to_string(rc);
    }
    return std::string(text, static_cast<size_t>(length));
}

// ---- types ----

MPI_Datatype mpi_type(CommType type) {
    switch (type) {
        case CommType::kFloat32:
            return MPI_FLOAT;
        case CommType::kFloat64:
            return MPI_DOUBLE;
        case CommType::kUint32:
            return MPI_UINT32_T;
        case CommType::kUint64:
            return MPI_UINT64_T;
        case CommType::kByte:
            return MPI_UINT8_T;  // an integer type, so reductions (modulo 256) are defined
    }
    throw Error(ErrorCategory::kInternal,
                "unknown CommType " + std::to_string(static_cast<int>(type)));
}

MPI_Op mpi_op(CommOp op) {
    switch (op) {
        case CommOp::kSum:
            return MPI_SUM;
        case CommOp::kMax:
            return MPI_MAX;
        case CommOp::kMin:
            return MPI_MIN;
    }
    throw Error(ErrorCategory::kInternal, "unknown CommOp " + std::to_string(static_cast<int>(op)));
}

const unsigned char* bytes(const void* p) {
    return static_cast<const unsigned char*>(p);
}
unsigned char* bytes(void* p) {
    return static_cast<unsigned char*>(p);
}

// Point-to-point tag of the split gather (the communicator is ours, so any tag is free).
constexpr int kGatherTag = 1;

}  // namespace

std::vector<MpiChunk> mpi_chunks(size_t count, size_t max_count) {
    max_count = std::clamp<size_t>(max_count, 1, INT_MAX);
    std::vector<MpiChunk> chunks;
    chunks.reserve((count + max_count - 1) / max_count);
    for (size_t offset = 0; offset < count; offset += max_count) {
        chunks.push_back({offset, static_cast<int>(std::min(max_count, count - offset))});
    }
    return chunks;
}

void mpi_check(int rc, const std::string& call, int rank, int size) {
    if (rc == MPI_SUCCESS) return;
    throw Error(ErrorCategory::kCommunication, call + " failed on rank " + std::to_string(rank) +
                                                   " of " + std::to_string(size) + ": " +
                                                   error_string(rc));
}

void mpi_ensure_initialized() {
    std::lock_guard<std::mutex> lock(g_init_mutex);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) {
        throw Error(ErrorCategory::kCommunication,
                    "MPI was already finalised in this process and cannot be initialised again");
    }
    if (initialized) return;  // the program's: it finalises too
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        throw Error(ErrorCategory::kCommunication, "MPI_Init_thread failed: " + error_string(rc));
    }
    g_initialized_by_library = true;
    std::atexit(finalize_at_exit);
}

bool mpi_initialized_by_library() {
    std::lock_guard<std::mutex> lock(g_init_mutex);
    return g_initialized_by_library;
}

// ---- MpiCommunicator ----

MpiCommunicator::MpiCommunicator(Backend& backend, Staging staging)
    : backend_(&backend), host_memory_(staging == Staging::kAuto && backend.name() == "cpu") {
    init();
}

MpiCommunicator::MpiCommunicator() {
    init();
}

void MpiCommunicator::init() {
    mpi_ensure_initialized();
    // MPI_COMM_WORLD's handler (errors are fatal) still covers these two calls.
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    const int rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&comm_);
        check(rc, "MPI_Comm_set_errhandler");
    }
}

MpiCommunicator::~MpiCommunicator() {
    // After MPI_Finalize (the atexit handler ran first) MPI objects must not be touched.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::set_max_chunk(size_t elements) {
    max_chunk_ = std::clamp<size_t>(elements, 1, INT_MAX);
}

void MpiCommunicator::check_root(const char* what, int root) const {
    if (root < 0 || root >= size_) {
        throw Error(ErrorCategory::kUsage, std::string(what) + " root " + std::to_string(root) +
                                               " out of range for " + std::to_string(size_) +
                                               " ranks");
    }
}

unsigned char* MpiCommunicator::staging(size_t bytes) {
    if (staging_.size() < bytes) staging_.resize(bytes);
    return staging_.data();
}

// ---- the collectives: stage when the buffers are not host memory ----

void MpiCommunicator::all_gather(const void* send, void* recv, size_t count, CommType type) {
    if (count == 0) return;  // the same count on every rank: all of them return
    if (host_memory_) return all_gather_host(send, recv, count, type);
    const size_t block = count * comm_type_size(type);
    unsigned char* host = staging((size_t(size_) + 1) * block);  // [size blocks | send block]
    backend_->synchronize();
    backend_->download(host + size_ * block, send, block);
    all_gather_host(host + size_ * block, host, count, type);
    backend_->upload(recv, host, size_ * block);
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, size_t count, CommType type,
                                     CommOp op) {
    if (count == 0) return;
    if (host_memory_) return reduce_scatter_host(send, recv, count, type, op);
    const size_t block = count * comm_type_size(type);
    unsigned char* host = staging((size_t(size_) + 1) * block);  // [size send blocks | recv]
    backend_->synchronize();
    backend_->download(host, send, size_ * block);
    reduce_scatter_host(host, host + size_ * block, count, type, op);
    backend_->upload(recv, host + size_ * block, block);
}

void MpiCommunicator::all_reduce(void* data, size_t count, CommType type, CommOp op) {
    if (count == 0) return;
    if (host_memory_) return all_reduce_host(data, count, type, op);
    const size_t block = count * comm_type_size(type);
    unsigned char* host = staging(block);
    backend_->synchronize();
    backend_->download(host, data, block);
    all_reduce_host(host, count, type, op);
    backend_->upload(data, host, block);
}

void MpiCommunicator::broadcast(void* data, size_t count, CommType type, int root) {
    check_root("broadcast", root);
    if (count == 0) return;
    if (host_memory_) return broadcast_host(data, count, type, root);
    const size_t block = count * comm_type_size(type);
    unsigned char* host = staging(block);
    if (rank_ == root) {
        backend_->synchronize();
        backend_->download(host, data, block);
    }
    broadcast_host(host, count, type, root);
    if (rank_ != root) backend_->upload(data, host, block);
}

void MpiCommunicator::gather(const void* send, void* recv, size_t count, CommType type, int root) {
    check_root("gather", root);
    if (count == 0) return;
    if (host_memory_) return gather_host(send, recv, count, type, root);
    const size_t block = count * comm_type_size(type);
    const size_t blocks = rank_ == root ? size_t(size_) : 0;  // the root receives size blocks
    unsigned char* host = staging((blocks + 1) * block);      // [size blocks (root) | send]
    backend_->synchronize();
    backend_->download(host + blocks * block, send, block);
    gather_host(host + blocks * block, host, count, type, root);
    if (rank_ == root) backend_->upload(recv, host, size_ * block);
}

void MpiCommunicator::barrier() {
    check(MPI_Barrier(comm_), "MPI_Barrier");
}

// ---- host memory ----

void MpiCommunicator::all_gather_host(const void* send, void* recv, size_t count, CommType type) {
    const std::vector<MpiChunk> chunks = mpi_chunks(count, max_chunk_);
    const MPI_Datatype t = mpi_type(type);
    if (chunks.size() == 1) {
        const int n = chunks[0].count;
        check(MPI_Allgather(send, n, t, recv, n, t, comm_), "MPI_Allgather");
        return;
    }
    // Split: rank r broadcasts its chunk straight into its place in everyone's recv.
    const size_t es = comm_type_size(type);
    for (const MpiChunk& c : chunks) {
        for (int r = 0; r < size_; ++r) {
            unsigned char* slot = bytes(recv) + (size_t(r) * count + c.offset) * es;
            if (r == rank_) std::memcpy(slot, bytes(send) + c.offset * es, size_t(c.count) * es);
            check(MPI_Bcast(slot, c.count, t, r, comm_), "MPI_Bcast (split all_gather)");
        }
    }
}

void MpiCommunicator::reduce_scatter_host(const void* send, void* recv, size_t count, CommType type,
                                          CommOp op) {
    const std::vector<MpiChunk> chunks = mpi_chunks(count, max_chunk_);
    const MPI_Datatype t = mpi_type(type);
    const MPI_Op o = mpi_op(op);
    if (chunks.size() == 1) {
        check(MPI_Reduce_scatter_block(send, recv, chunks[0].count, t, o, comm_),
              "MPI_Reduce_scatter_block");
        return;
    }
    // Split: block r's chunk is reduced onto rank r.
    const size_t es = comm_type_size(type);
    for (const MpiChunk& c : chunks) {
        for (int r = 0; r < size_; ++r) {
            const unsigned char* block = bytes(send) + (size_t(r) * count + c.offset) * es;
            void* out = r == rank_ ? bytes(recv) + c.offset * es : nullptr;
            check(MPI_Reduce(block, out, c.count, t, o, r, comm_),
                  "MPI_Reduce (split reduce_scatter)");
        }
    }
}

void MpiCommunicator::all_reduce_host(void* data, size_t count, CommType type, CommOp op) {
    const size_t es = comm_type_size(type);
    for (const MpiChunk& c : mpi_chunks(count, max_chunk_)) {
        check(MPI_Allreduce(MPI_IN_PLACE, bytes(data) + c.offset * es, c.count, mpi_type(type),
                            mpi_op(op), comm_),
              "MPI_Allreduce");
    }
}

void MpiCommunicator::broadcast_host(void* data, size_t count, CommType type, int root) {
    const size_t es = comm_type_size(type);
    for (const MpiChunk& c : mpi_chunks(count, max_chunk_)) {
        check(MPI_Bcast(bytes(data) + c.offset * es, c.count, mpi_type(type), root, comm_),
              "MPI_Bcast");
    }
}

void MpiCommunicator::gather_host(const void* send, void* recv, size_t count, CommType type,
                                  int root) {
    const std::vector<MpiChunk> chunks = mpi_chunks(count, max_chunk_);
    const MPI_Datatype t = mpi_type(type);
    if (chunks.size() == 1) {
        const int n = chunks[0].count;
        check(MPI_Gather(send, n, t, rank_ == root ? recv : nullptr, n, t, root, comm_),
              "MPI_Gather");
        return;
    }
    // Split: every other rank sends its chunks to the root, which receives them in (chunk, rank)
    // order straight into place. Messages between two ranks do not overtake, so chunk c of rank
    // r always meets the root's receive for it.
    const size_t es = comm_type_size(type);
    for (const MpiChunk& c : chunks) {
        for (int r = 0; r < size_; ++r) {
            const unsigned char* src = bytes(send) + c.offset * es;
            if (r == root) {
                if (rank_ == root) {
                    std::memcpy(bytes(recv) + (size_t(r) * count + c.offset) * es, src,
                                size_t(c.count) * es);
                }
            } else if (rank_ == r) {
                check(MPI_Send(src, c.count, t, root, kGatherTag, comm_),
                      "MPI_Send (split gather)");
            } else if (rank_ == root) {
                unsigned char* slot = bytes(recv) + (size_t(r) * count + c.offset) * es;
                check(MPI_Recv(slot, c.count, t, r, kGatherTag, comm_, MPI_STATUS_IGNORE),
                      "MPI_Recv (split gather)");
            }
        }
    }
}

}  // namespace sparsenet
