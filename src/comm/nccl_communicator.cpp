// The NCCL communicator (nccl_communicator.h).
#include "comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_teardown.h"
#include "sparsenet/error.h"

namespace sparsenet::nccl {

namespace {

// The functions we call, from the dlopened library; the header gives their types.
struct NcclApi {
    decltype(&ncclGetUniqueId) get_unique_id = nullptr;
    decltype(&ncclCommInitRank) comm_init_rank = nullptr;
    decltype(&ncclCommDestroy) comm_destroy = nullptr;
    decltype(&ncclCommAbort) comm_abort = nullptr;
    decltype(&ncclAllGather) all_gather = nullptr;
    decltype(&ncclReduceScatter) reduce_scatter = nullptr;
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclBroadcast) broadcast = nullptr;
    decltype(&ncclSend) send = nullptr;
    decltype(&ncclRecv) recv = nullptr;
    decltype(&ncclGroupStart) group_start = nullptr;
    decltype(&ncclGroupEnd) group_end = nullptr;
    decltype(&ncclGetErrorString) error_string = nullptr;
    decltype(&ncclGetLastError) last_error = nullptr;  // optional: NCCL >= 2.13
    // Optional: NCCL >= 2.14 (nccl_teardown.h). Declared here rather than with decltype so that
    // the file still compiles against an older nccl.h.
    ncclResult_t (*comm_finalize)(ncclComm_t) = nullptr;
};

struct Loaded {
    NcclApi api;
    std::string error;  // empty: loaded
};

Loaded load() {
    Loaded l;
    const std::string soname = "libnccl.so." + std::to_string(NCCL_MAJOR);
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed
    if (lib == nullptr) {
        const char* err = dlerror();
        l.error = "cannot load NCCL (" + soname + "): " + (err != nullptr ? err : "unknown error");
        return l;
    }
    auto load = [&](auto& fn, const char* name, bool required) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
        if (fn == nullptr && required && l.error.empty()) {
            l.error = "NCCL (" + soname + ") has no symbol " + name;
        }
    };
    load(l.api.get_unique_id, "ncclGetUniqueId", true);
    load(l.api.comm_init_rank, "ncclCommInitRank", true);
    load(l.api.comm_destroy, "ncclCommDestroy", true);
    load(l.api.comm_abort, "ncclCommAbort", true);
    load(l.api.all_gather, "ncclAllGather", true);
    load(l.api.reduce_scatter, "ncclReduceScatter", true);
    load(l.api.all_reduce, "ncclAllReduce", true);
    load(l.api.broadcast, "ncclBroadcast", true);
    load(l.api.send, "ncclSend", true);
    load(l.api.recv, "ncclRecv", true);
    load(l.api.group_start, "ncclGroupStart", true);
    load(l.api.group_end, "ncclGroupEnd", true);
    load(l.api.error_string, "ncclGetErrorString", true);
    load(l.api.last_error, "ncclGetLastError", false);
    load(l.api.comm_finalize, "ncclCommFinalize", false);
    return l;
}

// Loaded once per process.
const Loaded& loaded() {
    static const Loaded l = load();
    return l;
}

const NcclApi& api() {
    const Loaded& l = loaded();
    if (!l.error.empty()) throw Error(ErrorCategory::kCommunication, l.error);
    return l.api;
}

ncclDataType_t nccl_type(CommType type) {
    switch (type) {
        case CommType::kFloat32:
            return ncclFloat32;
        case CommType::kFloat64:
            return ncclFloat64;
        case CommType::kUint32:
            return ncclUint32;
        case CommType::kUint64:
            return ncclUint64;
        case CommType::kByte:
            return ncclUint8;
    }
    throw Error(ErrorCategory::kInternal,
                "unknown CommType " + std::to_string(static_cast<int>(type)));
}

ncclRedOp_t nccl_op(CommOp op) {
    switch (op) {
        case CommOp::kSum:
            return ncclSum;
        case CommOp::kMax:
            return ncclMax;
        case CommOp::kMin:
            return ncclMin;
    }
    throw Error(ErrorCategory::kInternal, "unknown CommOp " + std::to_string(static_cast<int>(op)));
}

class NcclCommunicator final : public Communicator {
  public:
    explicit NcclCommunicator(CudaBackend& backend);
    ~NcclCommunicator() override;
    NcclCommunicator(const NcclCommunicator&) = delete;
    NcclCommunicator& operator=(const NcclCommunicator&) = delete;

    int rank() const override { return bootstrap_.rank(); }
    int size() const override { return bootstrap_.size(); }
    std::string name() const override { return "nccl"; }

    void all_gather(const void* send, void* recv, size_t count, CommType type) override;
    void reduce_scatter(const void* send, void* recv, size_t count, CommType type,
                        CommOp op) override;
    void all_reduce(void* data, size_t count, CommType type, CommOp op) override;
    void broadcast(void* data, size_t count, CommType type, int root) override;
    void gather(const void* send, void* recv, size_t count, CommType type, int root) override;
    void barrier() override;

  private:
    void check(ncclResult_t result, const char* call) const;
    void check_root(const char* what, int root) const;

    CudaBackend& backend_;
    MpiCommunicator bootstrap_;  // host memory: the unique id, barrier, abort
    cudaStream_t stream_ = nullptr;
    ncclComm_t comm_ = nullptr;
};

NcclCommunicator::NcclCommunicator(CudaBackend& backend)
    : backend_(backend), stream_(backend.compute_stream()) {
    // Every rank checks that NCCL loads, then rank 0 makes the id and sends it with its status:
    // a failure anywhere ends every rank with an error, none is left waiting in
    // ncclCommInitRank.
    std::string why;
    uint32_t loads = available(&why) ? 1 : 0;
    bootstrap_.all_reduce(&loads, 1, CommType::kUint32, CommOp::kMin);
    if (loads == 0) {
        throw Error(ErrorCategory::kCommunication,
                    why.empty() ? "NCCL cannot be loaded on another rank" : why);
    }
    struct {
        uint32_t ok;
        ncclUniqueId id;
    } root{0, {}};
    if (rank() == 0) {
        const ncclResult_t r = api().get_unique_id(&root.id);
        root.ok = r == ncclSuccess ? 1 : 0;
        if (r != ncclSuccess) why = std::string("ncclGetUniqueId failed: ") + api().error_string(r);
    }
    bootstrap_.broadcast(&root, sizeof root, CommType::kByte, 0);
    if (root.ok == 0) {
        throw Error(ErrorCategory::kCommunication,
                    rank() == 0 ? why : "ncclGetUniqueId failed on rank 0");
    }
    const NcclApi& nccl = api();
    // The communicator belongs to the current device: the backend's.
    cuda::check_cuda(cudaSetDevice(backend.device()), "cudaSetDevice", "starting NCCL");
    check(nccl.comm_init_rank(&comm_, size(), root.id, rank()), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
    if (comm_ == nullptr) return;
    // Finalise (flush in-flight collectives and NCCL's proxy) before destroying: an unfinalised
    // communicator can hang the process at exit (nccl_teardown.h). On the backend's device.
    (void)cudaSetDevice(backend_.device());
    (void)cudaGetLastError();
    const NcclApi& nccl = loaded().api;
    (void)finalize_and_destroy(comm_, nccl.comm_finalize, nccl.comm_destroy, nccl.comm_abort);
    comm_ = nullptr;
}

void NcclCommunicator::check(ncclResult_t result, const char* call) const {
    if (result == ncclSuccess) return;
    const NcclApi& nccl = loaded().api;
    std::string text = nccl.error_string(result);
    if (nccl.last_error != nullptr && comm_ != nullptr) {
        const char* last = nccl.last_error(comm_);
        if (last != nullptr && *last != '\0') text += " (" + std::string(last) + ")";
    }
    throw Error(ErrorCategory::kCommunication, std::string(call) + " failed on rank " +
                                                   std::to_string(rank()) + " of " +
                                                   std::to_string(size()) + ": " + text);
}

void NcclCommunicator::check_root(const char* what, int root) const {
    if (root < 0 || root >= size()) {
        throw Error(ErrorCategory::kUsage, std::string(what) + " root " + std::to_string(root) +
                                               " out of range for " + std::to_string(size()) +
                                               " ranks");
    }
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t count, CommType type) {
    if (count == 0) return;
    check(api().all_gather(send, recv, count, nccl_type(type), comm_, stream_), "ncclAllGather");
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t count, CommType type,
                                      CommOp op) {
    if (count == 0) return;
    check(api().reduce_scatter(send, recv, count, nccl_type(type), nccl_op(op), comm_, stream_),
          "ncclReduceScatter");
}

void NcclCommunicator::all_reduce(void* data, size_t count, CommType type, CommOp op) {
    if (count == 0) return;
    check(api().all_reduce(data, data, count, nccl_type(type), nccl_op(op), comm_, stream_),
          "ncclAllReduce");
}

void NcclCommunicator::broadcast(void* data, size_t count, CommType type, int root) {
    check_root("broadcast", root);
    if (count == 0) return;
    check(api().broadcast(data, data, count, nccl_type(type), root, comm_, stream_),
          "ncclBroadcast");
}

void NcclCommunicator::gather(const void* send, void* recv, size_t count, CommType type, int root) {
    check_root("gather", root);
    if (count == 0) return;
    const NcclApi& nccl = api();
    const ncclDataType_t t = nccl_type(type);
    const size_t block = count * comm_type_size(type);
    if (rank() == root) {
        unsigned char* out = static_cast<unsigned char*>(recv);
        cuda::check_cuda(cudaMemcpyAsync(out + size_t(root) * block, send, block,
                                         cudaMemcpyDeviceToDevice, stream_),
                         "cudaMemcpyAsync", "gather (the root's own block)");
        check(nccl.group_start(), "ncclGroupStart");
        for (int r = 0; r < size(); ++r) {
            if (r == root) continue;
            check(nccl.recv(out + size_t(r) * block, count, t, r, comm_, stream_), "ncclRecv");
        }
        check(nccl.group_end(), "ncclGroupEnd");
    } else {
        check(nccl.send(send, count, t, root, comm_, stream_), "ncclSend");
    }
}

void NcclCommunicator::barrier() {
    backend_.synchronize();  // this rank's enqueued collectives and ops are done
    bootstrap_.barrier();
}

}  // namespace

bool available(std::string* why) {
    const Loaded& l = loaded();
    if (why != nullptr) *why = l.error;
    return l.error.empty();
}

std::shared_ptr<Communicator> make_communicator(Backend& backend) {
    auto* cuda = dynamic_cast<CudaBackend*>(&backend);
    if (cuda == nullptr) {
        throw Error(ErrorCategory::kUsage,
                    "the NCCL communicator needs a CUDA backend, not \"" + backend.name() + "\"");
    }
    return std::make_shared<NcclCommunicator>(*cuda);
}

}  // namespace sparsenet::nccl
