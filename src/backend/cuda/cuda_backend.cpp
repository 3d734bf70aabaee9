// The CUDA backend: lifetime, memory, transfers, cuBLAS GEMM, the device registry, and the op
// implementations (arguments checked by Backend, backend_ops.cpp; then the launchers of
// kernels/cuda_*.cu). See cuda_backend.h for the execution model.
#include "backend/cuda/cuda_backend.h"
#include "backend/gemm_extents.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backend/cuda/cuda_registry.h"
#include "sparsenet/error.h"

#ifndef SPARSENET_CUDA_ARCHITECTURES
#define SPARSENET_CUDA_ARCHITECTURES "unknown"
#endif

namespace sparsenet {

namespace cuda {

namespace {

std::string error_text(cudaError_t err) {
    return std::string(cudaGetErrorString(err)) + " (" + cudaGetErrorName(err) + ")";
}

// cuBLAS is loaded with dlopen when the first CUDA backend is created, not linked: linking it
// makes every process that links libsparsenet map cuBLAS and cuBLASLt at start (measured on the
// GPU-less builder: 0.05-0.1 s and 220 MB of RSS per process, doubling the CPU test suite's wall
// time), whether or not it ever uses a GPU. The headers still give the types and signatures.
struct CublasApi {
    decltype(&cublasCreate_v2) create = nullptr;
    decltype(&cublasDestroy_v2) destroy = nullptr;
    decltype(&cublasSetStream_v2) set_stream = nullptr;
    decltype(&cublasSetMathMode) set_math_mode = nullptr;
    decltype(&cublasSgemm_v2) sgemm = nullptr;
    // cublasGemmEx is overloaded in C++ (an inline wrapper taking cudaDataType as the compute
    // type): the exported one takes cublasComputeType_t.
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void*, const void*, cudaDataType, int, const void*,
                              cudaDataType, int, const void*, void*, cudaDataType, int,
                              cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
    decltype(&cublasGetStatusString) status_string = nullptr;
    decltype(&cublasGetStatusName) status_name = nullptr;
};

CublasApi load_cublas() {
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed
    if (lib == nullptr) {
        const char* err = dlerror();
        throw Error(ErrorCategory::kDevice, "cannot load cuBLAS (" + soname +
                                                "): " + (err != nullptr ? err : "unknown error"));
    }
    CublasApi api;
    auto load = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
        if (fn == nullptr) {
            throw Error(ErrorCategory::kDevice, "cuBLAS (" + soname + ") has no symbol " + name);
        }
    };
    load(api.create, "cublasCreate_v2");
    load(api.destroy, "cublasDestroy_v2");
    load(api.set_stream, "cublasSetStream_v2");
    load(api.set_math_mode, "cublasSetMathMode");
    load(api.sgemm, "cublasSgemm_v2");
    load(api.gemm_ex, "cublasGemmEx");
    load(api.status_string, "cublasGetStatusString");
    load(api.status_name, "cublasGetStatusName");
    return api;
}

// Loaded once per process (a throwing initialisation is retried by the next call).
const CublasApi& cublas() {
    static const CublasApi api = load_cublas();
    return api;
}

std::string cublas_text(cublasStatus_t st) {
    return std::string(cublas().status_string(st)) + " (" + cublas().status_name(st) + ")";
}

void check_cublas(cublasStatus_t st, const char* call, const std::string& doing) {
    if (st == CUBLAS_STATUS_SUCCESS) return;
    throw Error(ErrorCategory::kDevice,
                std::string(call) + " failed while " + doing + ": " + cublas_text(st));
}

}  // namespace

void check_cuda(cudaError_t err, const char* call, const std::string& doing) {
    if (err == cudaSuccess) return;
    (void)cudaGetLastError();  // clear a non-sticky error so later calls start clean
    throw Error(ErrorCategory::kDevice,
                std::string(call) + " failed while " + doing + ": " + error_text(err));
}

bool is_asynchronous_fault(cudaError_t err) {
    switch (err) {
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchFailure:
        case cudaErrorAssert:
        case cudaErrorHardwareStackError:
        case cudaErrorIllegalInstruction:
        case cudaErrorMisalignedAddress:
        case cudaErrorInvalidAddressSpace:
        case cudaErrorInvalidPc:
        case cudaErrorLaunchTimeout:
        case cudaErrorECCUncorrectable:
            return true;
        default:
            return false;
    }
}

std::string launch_error_message(const char* kernel, cudaError_t err, const char* previous,
                                 bool sync_check, int device) {
    const std::string dev = "cuda:" + std::to_string(device);
    if (!is_asynchronous_fault(err)) {
        return std::string("launching ") + kernel + " on " + dev + " failed: " + error_text(err);
    }
    if (sync_check) {
        // The stream was synchronised after every earlier launch: the fault is this kernel's.
        return std::string(kernel) + " faulted on " + dev + ": " + error_text(err) +
               " (SPARSENET_CUDA_SYNC_CHECK=1: found by the synchronisation after its launch)";
    }
    return std::string("a kernel enqueued before ") + kernel + " faulted on " + dev + ": " +
           error_text(err) + "; the fault happened in " +
           (previous != nullptr ? std::string(previous) + " (the last kernel launched before)"
                                : std::string("an earlier kernel")) +
           " or earlier, not in " + kernel +
           "; run with SPARSENET_CUDA_SYNC_CHECK=1 to name the kernel (every launch is then "
           "synchronised)";
}

void check_launch(const Context& ctx, const char* kernel) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && ctx.sync_check) {
        err = cudaStreamSynchronize(ctx.stream);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            throw Error(ErrorCategory::kDevice,
                        launch_error_message(kernel, err, ctx.last_kernel, true, ctx.device));
        }
    }
    if (err != cudaSuccess) {
        throw Error(ErrorCategory::kDevice,
                    launch_error_message(kernel, err, ctx.last_kernel, ctx.sync_check, ctx.device));
    }
    ctx.last_kernel = kernel;
}

void* device_alloc(const Context& ctx, size_t bytes, const char* what) {
    void* p = nullptr;
    const cudaError_t err =
        ctx.use_pool ? cudaMallocAsync(&p, bytes, ctx.stream) : cudaMalloc(&p, bytes);
    if (err != cudaSuccess || p == nullptr) {
        (void)cudaGetLastError();
        const std::string device = "cuda:" + std::to_string(ctx.device);
        std::string detail =
            std::string(ctx.use_pool ? "cudaMallocAsync" : "cudaMalloc") + ": " + error_text(err);
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
            detail += "; " + device + " has " + format_bytes(free_bytes) + " free of " +
                      format_bytes(total_bytes);
        }
        (void)cudaGetLastError();
        throw out_of_memory_error("device memory on " + device, bytes, what, ctx.held_bytes,
                                  ctx.held_buffers, detail);
    }
    return p;
}

void device_free(const Context& ctx, void* p) noexcept {
    if (p == nullptr) return;
    if (ctx.use_pool) {
        (void)cudaFreeAsync(p, ctx.stream);
    } else {
        (void)cudaFree(p);
    }
    (void)cudaGetLastError();
}

void* ScratchBuffer::get(const Context& ctx, size_t bytes, const char* what) {
    if (bytes <= bytes_ && p_ != nullptr) return p_;
    const size_t grown = std::max(bytes, bytes_ + bytes_ / 2);
    release(ctx);  // stream-ordered: kernels already enqueued on the old buffer finish first
    p_ = device_alloc(ctx, std::max<size_t>(grown, 16), what);
    bytes_ = std::max<size_t>(grown, 16);
    return p_;
}

void ScratchBuffer::release(const Context& ctx) noexcept {
    device_free(ctx, p_);
    p_ = nullptr;
    bytes_ = 0;
}

int device_count(std::string* why) {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (why != nullptr) *why = "cudaGetDeviceCount: " + error_text(err);
        return 0;
    }
    if (n <= 0) {
        if (why != nullptr) *why = "cudaGetDeviceCount reports no CUDA device";
        return 0;
    }
    return n;
}

bool device_usable(int index, std::string* why) {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    (void)cudaGetLastError();
    const std::string name = "cuda:" + std::to_string(index);
    cudaError_t err = cudaSetDevice(index);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (why != nullptr)
            *why = "cudaSetDevice(" + std::to_string(index) + "): " + error_text(err);
        return false;
    }
    err = probe_kernel_image();
    bool ok = err == cudaSuccess;
    if (!ok) {
        (void)cudaGetLastError();
        if (why != nullptr) {
            int major = 0, minor = 0;
            cudaDeviceProp prop;
            std::memset(&prop, 0, sizeof(prop));
            (void)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index);
            (void)cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index);
            (void)cudaGetDeviceProperties(&prop, index);
            (void)cudaGetLastError();
            *why = name + " (" + std::string(prop.name) + ", compute capability " +
                   std::to_string(major) + "." + std::to_string(minor) +
                   ") cannot run this build's kernels, built for CUDA architectures " +
                   SPARSENET_CUDA_ARCHITECTURES + " (cudaFuncGetAttributes: " + error_text(err) +
                   "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(major) +
                   std::to_string(minor);
        }
    }
    if (previous >= 0 && previous != index) (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
    return ok;
}

std::string device_name(int index) {
    cudaDeviceProp prop;
    std::memset(&prop, 0, sizeof(prop));
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
        (void)cudaGetLastError();
        return "";
    }
    prop.name[sizeof(prop.name) - 1] = '\0';
    return prop.name;
}

std::unique_ptr<Backend> create_backend(int index) {
    return std::make_unique<CudaBackend>(index);
}

void prepare_device(int index) {
    try {
        if (cudaSetDevice(index) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
        }
        cublasHandle_t handle = nullptr;
        if (cublas().create(&handle) == CUBLAS_STATUS_SUCCESS) (void)cublas().destroy(handle);
    } catch (...) {  // cuBLAS not loadable: create_backend says so
    }
}

}  // namespace cuda

namespace {

// The implementation's own limit (cuBLAS takes int dimensions); the op's argument checks are
// Backend's (backend_ops.cpp).
void check(bool ok, const char* op, const char* what) {
    if (!ok) throw Error(ErrorCategory::kInternal, std::string(op) + ": " + what);
}

std::string status_message(const cuda::DeviceStatus& s) {
    const std::string op = to_string(static_cast<Op>(s.op));
    const std::string a = std::to_string(s.a), b = std::to_string(s.b);
    std::string m;
    switch (s.code) {
        case cuda::kStatusColumnOutOfRange:
            m = op + ": column id " + a + " >= input width " + b;
            break;
        case cuda::kStatusGradCapacity:
            m = op + ": the batch touches " + a + " rows but the gradient capacity is " + b;
            break;
        case cuda::kStatusPairOverflow:
            m = op + ": a tile of the batch stores " + a + " entries but the scratch holds " + b +
                " (the gradient capacity must be >= min(input width, stored entries of the "
                "batch))";
            break;
        case cuda::kStatusRowOutOfRange:
            m = op + ": gradient row id " + a + " out of range (" + b + " rows)";
            break;
        case cuda::kStatusCountOverCapacity:
            m = op + ": row count " + a + " exceeds the capacity " + b;
            break;
        case cuda::kStatusTargetOutOfRange:
            m = op + ": target column id " + a + " >= output width " + b;
            break;
        case cuda::kStatusTargetNotIncreasing:
            m = op + ": target row " + a + ": column " + b +
                " repeated or out of order (target rows must hold strictly increasing column "
                "ids)";
            break;
        default:
            m = op + ": device error code " + std::to_string(s.code);
    }
    return m +
           " (found on the device; reported at the next synchronisation, results of that op "
           "are incomplete)";
}

}  // namespace

// ---- lifetime ----

CudaBackend::CudaBackend(int device) : device_(device) {
    ctx_.device = device;
    const std::string where = "creating the CUDA backend on cuda:" + std::to_string(device);
    try {
        cuda::check_cuda(cudaSetDevice(device), "cudaSetDevice", where);
        int sms = 0;
        cuda::check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                         "cudaDeviceGetAttribute", where);
        ctx_.sm_count = std::max(1, sms);
        int pools = 0;
        if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) !=
            cudaSuccess) {
            pools = 0;
            (void)cudaGetLastError();
        }
        ctx_.use_pool = pools != 0;
        if (ctx_.use_pool) {
            // Keep freed blocks in the device's default pool (no release at each synchronisation).
            cudaMemPool_t pool = nullptr;
            if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
                uint64_t threshold = UINT64_MAX;
                (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
            }
            (void)cudaGetLastError();
        }
        cuda::check_cuda(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking),
                         "cudaStreamCreateWithFlags", where + " (compute stream)");
        cuda::check_cuda(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
                         "cudaStreamCreateWithFlags", where + " (copy stream)");
        cuda::check_cuda(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming),
                         "cudaEventCreateWithFlags", where);
        cuda::check_cuda(cudaEventCreateWithFlags(&copy_done_, cudaEventDisableTiming),
                         "cudaEventCreateWithFlags", where);
        for (int i = 0; i < kStagingSlots; ++i) {
            cuda::check_cuda(cudaEventCreateWithFlags(&staging_done_[i], cudaEventDisableTiming),
                             "cudaEventCreateWithFlags", where);
            cuda::check_cuda(
                cudaHostAlloc(&staging_[i], kStagingBytes, cudaHostAllocDefault), "cudaHostAlloc",
                where + " (" + std::to_string(kStagingBytes) + " bytes of pinned staging memory)");
        }
        void* status_host = nullptr;
        cuda::check_cuda(
            cudaHostAlloc(&status_host, sizeof(cuda::DeviceStatus), cudaHostAllocDefault),
            "cudaHostAlloc", where + " (status mirror)");
        status_host_ = static_cast<cuda::DeviceStatus*>(status_host);
        std::memset(status_host_, 0, sizeof(cuda::DeviceStatus));
        ctx_.status = static_cast<cuda::DeviceStatus*>(
            cuda::device_alloc(ctx_, sizeof(cuda::DeviceStatus), "the device status block"));
        cuda::check_cuda(cudaMemsetAsync(ctx_.status, 0, sizeof(cuda::DeviceStatus), ctx_.stream),
                         "cudaMemsetAsync", where + " (status block)");
        cublasHandle_t handle = nullptr;
        cuda::check_cublas(cuda::cublas().create(&handle), "cublasCreate", where);
        cublas_ = handle;
        cuda::check_cublas(cuda::cublas().set_stream(cublas_, ctx_.stream), "cublasSetStream",
                           where);
        const char* sync_check = std::getenv("SPARSENET_CUDA_SYNC_CHECK");
        ctx_.sync_check = sync_check != nullptr && std::strcmp(sync_check, "1") == 0;
        // TF32 tensor cores by default (the dsstne-bench epoch's FP32 floor on an H100 is 0.37 s,
        // its target 0.3 s: docs/gpu.md); SPARSENET_CUDA_TF32=0 keeps exact FP32 GEMMs (the CUDA
        // tests set it: they compare against the FP32 CPU reference).
        // --precision and $.Training.Precision, when given, replace this through set_precision.
        const char* tf32 = std::getenv("SPARSENET_CUDA_TF32");
        set_precision_impl(tf32 == nullptr || std::strcmp(tf32, "0") != 0 ? Precision::kTf32
                                                                          : Precision::kFp32);
    } catch (...) {
        release_all();
        throw;
    }
}

CudaBackend::~CudaBackend() {
    release_all();
}

void CudaBackend::release_all() noexcept {
    (void)cudaSetDevice(device_);
    if (ctx_.stream != nullptr) (void)cudaStreamSynchronize(ctx_.stream);
    if (copy_stream_ != nullptr) (void)cudaStreamSynchronize(copy_stream_);
    if (ctx_.stream != nullptr) {
        for (cuda::ScratchBuffer* b : {&weight_grad_scratch_.touched,
                                       &weight_grad_scratch_.positions,
                                       &weight_grad_scratch_.col_map,
                                       &weight_grad_scratch_.seg_count,
                                       &weight_grad_scratch_.seg_start,
                                       &weight_grad_scratch_.pair_row,
                                       &weight_grad_scratch_.pair_coef,
                                       &weight_grad_scratch_.scan_block,
                                       &weight_grad_scratch_.sort_keys[0],
                                       &weight_grad_scratch_.sort_keys[1],
                                       &weight_grad_scratch_.sort_pairs[0],
                                       &weight_grad_scratch_.sort_pairs[1],
                                       &weight_grad_scratch_.sort_temp,
                                       &reduce_scratch_.partial,
                                       &reduce_scratch_.column,
                                       &reduce_scratch_.gradient,
                                       &row_loss_scratch_,
                                       &row_map_scratch_,
                                       &csr_matmul_partial_,
                                       &top_k_scratch_.exclude_bits,
                                       &top_k_scratch_.keys,
                                       &top_k_scratch_.sorted,
                                       &top_k_scratch_.offsets,
                                       &top_k_scratch_.temp,
                                       &bf16_a_,
                                       &bf16_b_})
            b->release(ctx_);
        cuda::device_free(ctx_, ctx_.status);
        ctx_.status = nullptr;
        (void)cudaStreamSynchronize(ctx_.stream);
    }
    if (cublas_ != nullptr) (void)cuda::cublas().destroy(cublas_);
    cublas_ = nullptr;
    for (int i = 0; i < kStagingSlots; ++i) {
        if (staging_done_[i] != nullptr) (void)cudaEventDestroy(staging_done_[i]);
        if (staging_[i] != nullptr) (void)cudaFreeHost(staging_[i]);
        staging_done_[i] = nullptr;
        staging_[i] = nullptr;
    }
    if (status_host_ != nullptr) (void)cudaFreeHost(status_host_);
    status_host_ = nullptr;
    if (compute_done_ != nullptr) (void)cudaEventDestroy(compute_done_);
    if (copy_done_ != nullptr) (void)cudaEventDestroy(copy_done_);
    compute_done_ = copy_done_ = nullptr;
    if (copy_stream_ != nullptr) (void)cudaStreamDestroy(copy_stream_);
    if (ctx_.stream != nullptr) (void)cudaStreamDestroy(ctx_.stream);
    copy_stream_ = nullptr;
    ctx_.stream = nullptr;
    (void)cudaGetLastError();
}

void CudaBackend::activate() const {
    cuda::check_cuda(cudaSetDevice(device_), "cudaSetDevice",
                     "selecting cuda:" + std::to_string(device_));
}

// ---- memory ----

void* CudaBackend::allocate(size_t bytes, const char* what) {
    activate();
    const size_t size = bytes == 0 ? 256 : bytes;
    void* p = cuda::device_alloc(ctx_, size, what);
    try {
        sizes_.emplace(p, size);
    } catch (...) {
        cuda::device_free(ctx_, p);
        throw;
    }
    ctx_.held_bytes += size;
    ++ctx_.held_buffers;
    return p;
}

void CudaBackend::deallocate(void* p) {
    if (p == nullptr) return;
    const auto it = sizes_.find(p);
    if (it != sizes_.end()) {
        ctx_.held_bytes -= it->second;
        --ctx_.held_buffers;
        sizes_.erase(it);
    }
    (void)cudaSetDevice(device_);
    cuda::device_free(ctx_, p);
}

void CudaBackend::order_copy_after_compute() {
    cuda::check_cuda(cudaEventRecord(compute_done_, ctx_.stream), "cudaEventRecord",
                     "ordering a transfer after the compute stream");
    cuda::check_cuda(cudaStreamWaitEvent(copy_stream_, compute_done_, 0), "cudaStreamWaitEvent",
                     "ordering a transfer after the compute stream");
}

void CudaBackend::enqueue_status_readback() {
    cuda::check_cuda(cudaMemcpyAsync(status_host_, ctx_.status, sizeof(cuda::DeviceStatus),
                                     cudaMemcpyDeviceToHost, ctx_.stream),
                     "cudaMemcpyAsync", "reading the device status block");
}

void CudaBackend::raise_device_status() {
    // Filled by a copy that a stream or event synchronisation has waited for.
    const cuda::DeviceStatus s = *status_host_;
    if (s.code == cuda::kStatusOk) return;
    std::memset(status_host_, 0, sizeof(cuda::DeviceStatus));
    (void)cudaMemsetAsync(ctx_.status, 0, sizeof(cuda::DeviceStatus), ctx_.stream);
    (void)cudaGetLastError();
    throw Error(ErrorCategory::kInternal, status_message(s));
}

void CudaBackend::upload(void* dst, const void* host_src, size_t bytes) {
    if (bytes == 0) return;
    activate();
    const std::string doing =
        "uploading " + std::to_string(bytes) + " bytes to cuda:" + std::to_string(device_);
    order_copy_after_compute();
    const char* in = static_cast<const char*>(host_src);
    char* out = static_cast<char*>(dst);
    int slot = 0;
    for (size_t off = 0; off < bytes; off += kStagingBytes, slot = (slot + 1) % kStagingSlots) {
        const size_t len = std::min(kStagingBytes, bytes - off);
        // The previous copy out of this staging buffer must be done before it is refilled.
        cuda::check_cuda(cudaEventSynchronize(staging_done_[slot]), "cudaEventSynchronize", doing);
        std::memcpy(staging_[slot], in + off, len);
        cuda::check_cuda(
            cudaMemcpyAsync(out + off, staging_[slot], len, cudaMemcpyHostToDevice, copy_stream_),
            "cudaMemcpyAsync", doing);
        cuda::check_cuda(cudaEventRecord(staging_done_[slot], copy_stream_), "cudaEventRecord",
                         doing);
    }
    // Later compute work sees the data, and so does any other stream or backend once this
    // returns (the Recommender's per-call backends read the weights the network's backend
    // uploaded): wait for the last chunk.
    cuda::check_cuda(cudaEventRecord(copy_done_, copy_stream_), "cudaEventRecord", doing);
    cuda::check_cuda(cudaStreamWaitEvent(ctx_.stream, copy_done_, 0), "cudaStreamWaitEvent", doing);
    cuda::check_cuda(cudaEventSynchronize(copy_done_), "cudaEventSynchronize", doing);
}

void CudaBackend::download(void* host_dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    activate();
    const std::string doing = "downloading " + std::to_string(bytes) +
                              " bytes from cuda:" + std::to_string(device_) + fault_hint();
    enqueue_status_readback();
    order_copy_after_compute();
    const char* in = static_cast<const char*>(src);
    char* out = static_cast<char*>(host_dst);
    const size_t chunks = (bytes + kStagingBytes - 1) / kStagingBytes;
    auto issue = [&](size_t i) {
        const int slot = int(i % kStagingSlots);
        const size_t off = i * kStagingBytes, len = std::min(kStagingBytes, bytes - off);
        cuda::check_cuda(
            cudaMemcpyAsync(staging_[slot], in + off, len, cudaMemcpyDeviceToHost, copy_stream_),
            "cudaMemcpyAsync", doing);
        cuda::check_cuda(cudaEventRecord(staging_done_[slot], copy_stream_), "cudaEventRecord",
                         doing);
    };
    for (size_t i = 0; i < std::min<size_t>(chunks, kStagingSlots); ++i) issue(i);
    for (size_t i = 0; i < chunks; ++i) {
        const int slot = int(i % kStagingSlots);
        const size_t off = i * kStagingBytes, len = std::min(kStagingBytes, bytes - off);
        cuda::check_cuda(cudaEventSynchronize(staging_done_[slot]), "cudaEventSynchronize", doing);
        std::memcpy(out + off, staging_[slot], len);
        if (i + kStagingSlots < chunks) issue(i + kStagingSlots);
    }
    // The status readback ran before the transfer (stream order), so it is in place.
    raise_device_status();
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0 || dst == src) return;
    activate();
    cuda::check_cuda(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx_.stream), "cudaMemcpyAsync",
        "copying " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device_));
}

void CudaBackend::fill(float* dst, size_t n, float value) {
    activate();
    cuda::launch_fill(ctx_, dst, n, value);
}

std::string CudaBackend::fault_hint() const {
    if (ctx_.last_kernel == nullptr) return "";
    return std::string(" (the last kernel enqueued: ") + ctx_.last_kernel +
           (ctx_.sync_check ? ")"
                            : "; SPARSENET_CUDA_SYNC_CHECK=1 synchronises after every launch "
                              "to name the kernel that faulted)");
}

void CudaBackend::synchronize() {
    activate();
    // An asynchronous fault surfaces here, after the kernel that made it: name the last one
    // enqueued (the fault is in it or before it) and the mode that names it exactly.
    const std::string doing = "synchronising cuda:" + std::to_string(device_) + fault_hint();
    enqueue_status_readback();
    cuda::check_cuda(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize", doing);
    cuda::check_cuda(cudaStreamSynchronize(copy_stream_), "cudaStreamSynchronize", doing);
    raise_device_status();
}

// ---- compute ----

void CudaBackend::csr_matmul_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView w,
                                  MatrixView z, float beta) {
    if (w.data == nullptr) {
        throw Error(ErrorCategory::kNotImplemented,
                    "not implemented yet: csr_matmul from BF16 input weights on the GPU "
                    "(Network::keep_bf16_input_weights is CPU-only)");
    }
    activate();
    cuda::launch_csr_matmul(ctx_, x, noise, w, z, beta, csr_matmul_partial_);
}

void CudaBackend::csr_weight_grad_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                                       float alpha, const SparseRowGrad& grad) {
    activate();
    cuda::launch_csr_weight_grad(ctx_, x, noise, dz, alpha, grad, weight_grad_scratch_,
                                 cuda::RowUpdate{});
}

void CudaBackend::sparse_step_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                                   float alpha, const formulas::OptimizerStep& step, MatrixView w,
                                   const SparseRowGrad& grad, float* state1, float* state2,
                                   SparseUpdate mode, RowClock clock) {
    // SPARSENET_CUDA_FUSED_SPARSE_STEP=0: the two kernels' path on the device (the parity test
    // compares the two).
    const char* off = std::getenv("SPARSENET_CUDA_FUSED_SPARSE_STEP");
    if ((off != nullptr && std::string(off) == "0") || w.cols == 0 ||
        !cuda::sparse_step_fusable(dz.rows, x.cols, grad.capacity)) {
        Backend::sparse_step_impl(x, noise, dz, alpha, step, w, grad, state1, state2, mode, clock);
        return;
    }
    activate();
    cuda::RowUpdate u;
    u.active = true;
    u.step = step;
    u.slots = formulas::optimizer_state_slots(step.kind);
    u.w = w;
    u.s1 = state1;
    u.s2 = state2;
    u.clock = clock;
    cuda::launch_csr_weight_grad(ctx_, x, noise, dz, alpha, grad, weight_grad_scratch_, u);
}

void CudaBackend::gemm_impl(bool trans_a, bool trans_b, float alpha, ConstMatrixView a,
                            ConstMatrixView b, float beta, MatrixView c) {
    if (c.rows == 0 || c.cols == 0) return;
    activate();
    if ((trans_a ? a.rows : a.cols) == 0) {  // op(a) . op(b) is zero: only the beta scaling
        cuda::launch_scale_matrix(ctx_, beta, c);
        return;
    }
    // n and k over zero padding where the views allow it, so that cuBLAS runs its vectorised
    // kernels (backend/gemm_extents.h: the dsstne-bench output GEMMs ran `align1` kernels).
    const bool bf16 = precision_ == Precision::kBf16;
    const GemmExtents e =
        gpu_gemm_extents(trans_a, trans_b, a, b, c, bf16 ? kGemmVectorBf16 : kGemmVectorFloats);
    const size_t m = e.m, n = e.n, k = e.k;
    const size_t imax = size_t(INT_MAX);
    check(m <= imax && n <= imax && k <= imax && a.ld <= imax && b.ld <= imax && c.ld <= imax,
          "gemm", "dimension exceeds the BLAS integer range");
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a row-major matrix
    // read column-major is its transpose: so B comes first with its own transpose flag.
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    if (bf16) {
        // Products and sums in FP32, C in FP32. An operand with a BF16 copy
        // (ConstMatrixView::bf16: the engine's weights, laid out like the FP32 matrix with zero
        // padding, written by the step that updates them) is read in place; any other (the
        // activations and deltas) is converted here over the extents the GEMM runs (contiguous:
        // ld = the copy's columns), one pass per GEMM.
        auto operand = [&](const ConstMatrixView& v, size_t run_cols, cuda::ScratchBuffer& scratch,
                           const char* what, size_t* ld) {
            if (v.bf16 != nullptr) {
                *ld = std::max<size_t>(v.ld, 1);
                return v.bf16;
            }
            ConstMatrixView run = v;
            run.cols = run_cols;
            uint16_t* copy = scratch.get_as<uint16_t>(ctx_, run.rows * run.cols, what);
            cuda::launch_round_bf16(ctx_, run, copy, run.cols);
            *ld = std::max<size_t>(run.cols, 1);
            return static_cast<const uint16_t*>(copy);
        };
        size_t lda = 1, ldb = 1;
        // a: [m, k], or [k, m] transposed; b: [k, n], or [n, k] transposed.
        const uint16_t* a16 =
            operand(a, trans_a ? a.cols : k, bf16_a_, "gemm's BF16 operand a", &lda);
        const uint16_t* b16 = operand(b, trans_b ? k : n, bf16_b_, "gemm's BF16 operand b", &ldb);
        cuda::check_cublas(
            cuda::cublas().gemm_ex(cublas_, op_b, op_a, int(n), int(m), int(k), &alpha, b16,
                                   CUDA_R_16BF, int(ldb), a16, CUDA_R_16BF, int(lda), &beta, c.data,
                                   CUDA_R_32F, int(std::max<size_t>(c.ld, 1)), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx",
            "computing a " + shape + " BF16 GEMM on cuda:" + std::to_string(device_));
        return;
    }
    cuda::check_cublas(
        cuda::cublas().sgemm(cublas_, op_b, op_a, int(n), int(m), int(k), &alpha, b.data,
                             int(std::max<size_t>(b.ld, 1)), a.data, int(std::max<size_t>(a.ld, 1)),
                             &beta, c.data, int(std::max<size_t>(c.ld, 1))),
        "cublasSgemm", "computing a " + shape + " GEMM on cuda:" + std::to_string(device_));
}

void CudaBackend::set_precision_impl(Precision p) {
    // TF32 tensor cores for kTf32; kFp32 and kBf16 (whose GemmEx names its own compute type)
    // keep CUBLAS_DEFAULT_MATH.
    activate();
    cuda::check_cublas(
        cuda::cublas().set_math_mode(
            cublas_, p == Precision::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode", "setting the GEMM precision of cuda:" + std::to_string(device_));
    precision_ = p;
}

void CudaBackend::bias_activation_forward_impl(const formulas::ActivationParams& act,
                                               const float* bias, MatrixView z, uint16_t* z_bf16) {
    activate();
    cuda::launch_bias_activation_forward(ctx_, act, bias, z, z_bf16);
}

void CudaBackend::activation_backward_impl(const formulas::ActivationParams& act, ConstMatrixView a,
                                           const DropoutMask* mask, MatrixView d,
                                           uint16_t* d_bf16) {
    activate();
    cuda::launch_activation_backward(ctx_, act, a, mask, d, d_bf16);
}

void CudaBackend::column_sum_impl(ConstMatrixView m, float alpha, float beta, float* out) {
    activate();
    cuda::launch_column_sum(ctx_, m, alpha, beta, out, reduce_scratch_);
}

void CudaBackend::dropout_impl(const DropoutMask& mask, MatrixView m) {
    if (!(mask.params.p > 0.0f) || m.rows == 0 || m.cols == 0) return;
    activate();
    cuda::launch_dropout(ctx_, mask, m);
}

void CudaBackend::output_delta_impl(const formulas::LossParams& loss,
                                    const formulas::ActivationParams& act, ConstMatrixView a,
                                    const CsrBatchView& target, float scale, MatrixView delta,
                                    double* loss_sum, float* row_norms, uint16_t* delta_bf16) {
    activate();
    cuda::launch_output_delta(ctx_, loss, act, a, target, scale, delta, loss_sum, row_norms,
                              delta_bf16, row_loss_scratch_);
}

void CudaBackend::activation_backward_column_sum_impl(const formulas::ActivationParams& act,
                                                      ConstMatrixView a, const DropoutMask* mask,
                                                      MatrixView d, float* column_sums,
                                                      uint16_t* d_bf16) {
    activate();
    cuda::launch_activation_backward_column_sum(ctx_, act, a, mask, d, column_sums, d_bf16,
                                                reduce_scratch_);
}

void CudaBackend::bias_activation_dropout_impl(const formulas::ActivationParams& act,
                                               const float* bias, const DropoutMask& mask,
                                               MatrixView z, uint16_t* z_bf16) {
    activate();
    cuda::launch_bias_activation_dropout(ctx_, act, bias, mask, z, z_bf16);
}

void CudaBackend::output_epilogue_impl(const formulas::LossParams& loss,
                                       const formulas::ActivationParams& act, const float* bias,
                                       MatrixView z, const CsrBatchView& target, float scale,
                                       MatrixView delta, double* loss_sum, float* row_norms,
                                       uint16_t* delta_bf16) {
    activate();
    cuda::launch_output_epilogue(ctx_, loss, act, bias, z, target, scale, delta, loss_sum,
                                 row_norms, delta_bf16, row_loss_scratch_);
}

void CudaBackend::sparseness_penalty_impl(float p, float beta, ConstMatrixView a, float scale,
                                          MatrixView delta, double* loss_sum) {
    activate();
    cuda::launch_sparseness_penalty(ctx_, p, beta, a, scale, delta, loss_sum, reduce_scratch_);
}

void CudaBackend::normalize_rows_impl(float max_norm, MatrixView m) {
    activate();
    cuda::launch_normalize_rows(ctx_, max_norm, m);
}

void CudaBackend::normalize_columns_impl(float max_norm, MatrixView w) {
    activate();
    cuda::launch_normalize_columns(ctx_, max_norm, w, reduce_scratch_);
}

void CudaBackend::row_max_impl(ConstMatrixView m, float* out) {
    activate();
    cuda::launch_row_max(ctx_, m, out);
}

void CudaBackend::exp_rows_impl(const float* shift, MatrixView m, float* row_sum) {
    activate();
    cuda::launch_exp_rows(ctx_, shift, m, row_sum);
}

void CudaBackend::divide_rows_impl(const float* divisor, MatrixView m) {
    activate();
    cuda::launch_divide_rows(ctx_, divisor, m);
}

void CudaBackend::sum_squares_impl(const std::vector<ConstMatrixView>& parts, float* out) {
    activate();
    cuda::launch_sum_squares(ctx_, parts, out, reduce_scratch_);
}

void CudaBackend::row_sum_squares_impl(ConstMatrixView m, float* out) {
    activate();
    cuda::launch_row_sum_squares(ctx_, m, out, reduce_scratch_);
}

void CudaBackend::clip_rows_impl(float max_norm, const float* sq_norm, MatrixView m) {
    activate();
    cuda::launch_clip_rows(ctx_, max_norm, sq_norm, m);
}

void CudaBackend::add_matrix_impl(float alpha, ConstMatrixView x, float beta, MatrixView y) {
    activate();
    cuda::launch_add_matrix(ctx_, alpha, x, beta, y);
}

void CudaBackend::scatter_rows_impl(const SparseRowGrad& grad, float beta, MatrixView dense) {
    if (dense.rows == 0 || dense.cols == 0) return;
    activate();
    cuda::launch_scale_matrix(ctx_, beta, dense);
    cuda::launch_scatter_rows_add(ctx_, grad, dense);
}

void CudaBackend::optimizer_step_impl(const formulas::OptimizerStep& step, MatrixView w,
                                      ConstMatrixView g, float* state1, float* state2,
                                      uint16_t* w_bf16) {
    activate();
    cuda::launch_optimizer_step(ctx_, step, w, g, state1, state2, w_bf16);
}

void CudaBackend::round_bf16_impl(ConstMatrixView m, uint16_t* out) {
    activate();
    cuda::launch_round_bf16(ctx_, m, out, std::max(m.ld, m.cols));
}

void CudaBackend::optimizer_step_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                                           const SparseRowGrad& grad, float* state1, float* state2,
                                           SparseUpdate mode, RowClock clock) {
    activate();
    cuda::launch_optimizer_step_rows(ctx_, step, w, grad, state1, state2, mode, clock,
                                     row_map_scratch_);
}

uint64_t CudaBackend::free_memory() {
    activate();
    size_t free_bytes = 0, total_bytes = 0;
    cuda::check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo",
                     "reading the free device memory");
    return free_bytes;
}

void CudaBackend::catch_up_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                                     const CsrBatchView* x, float* state1, RowClock clock) {
    if (w.rows == 0) return;
    activate();
    cuda::launch_catch_up_rows(ctx_, step, w, x, state1, clock);
}

void CudaBackend::top_k_impl(ConstMatrixView scores, const CsrBatchView* exclude, size_t k,
                             float* out_scores, uint32_t* out_indices,
                             const TopKActivation* activation) {
    if (scores.rows == 0 || k == 0) return;
    activate();
    cuda::launch_top_k(ctx_, scores, exclude, k, out_scores, out_indices, top_k_scratch_,
                       activation != nullptr ? &activation->params : nullptr,
                       activation != nullptr ? activation->bias : nullptr);
}

}  // namespace sparsenet
