// The backend registry and the op names.
#include "backend/backend.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <mutex>

#include "backend/cpu/cpu_backend.h"
#include "sparsenet/error.h"

#ifdef SPARSENET_WITH_CUDA
#include "backend/cuda/cuda_registry.h"
#endif

namespace sparsenet {

const char* to_string(Op op) {
    switch (op) {
        case Op::kCsrMatmul:
            return "csr_matmul";
        case Op::kCsrWeightGrad:
            return "csr_weight_grad";
        case Op::kGemm:
            return "gemm";
        case Op::kBiasActivationForward:
            return "bias_activation_forward";
        case Op::kActivationBackward:
            return "activation_backward";
        case Op::kColumnSum:
            return "column_sum";
        case Op::kDropout:
            return "dropout";
        case Op::kOutputDelta:
            return "output_delta";
        case Op::kOptimizerStep:
            return "optimizer_step";
        case Op::kOptimizerStepRows:
            return "optimizer_step_rows";
        case Op::kTopK:
            return "top_k";
        case Op::kSparsenessPenalty:
            return "sparseness_penalty";
        case Op::kNormalizeRows:
            return "normalize_rows";
        case Op::kNormalizeColumns:
            return "normalize_columns";
        case Op::kAddMatrix:
            return "add_matrix";
        case Op::kScatterRows:
            return "scatter_rows";
        case Op::kRowMax:
            return "row_max";
        case Op::kExpRows:
            return "exp_rows";
        case Op::kDivideRows:
            return "divide_rows";
        case Op::kRowSumSquares:
            return "row_sum_squares";
        case Op::kClipRows:
            return "clip_rows";
        case Op::kOutputEpilogue:
            return "output_epilogue";
        case Op::kBiasActivationDropout:
            return "bias_activation_dropout";
        case Op::kActivationBackwardColumnSum:
            return "activation_backward_column_sum";
    }
    return "unknown";
}

const char* const kOutOfMemoryAdvice =
    "to fit, use a smaller --batch (activations, deltas and the sparse gradients grow with "
    "it), a smaller network (fewer units in the widest layers), or split the network over more "
    "ranks (mpirun -np N, see docs/parallelism.md)";

std::string address_space_hint() {
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        return "; this process's address space is limited to " + format_bytes(limit.rlim_cur) +
               " (ulimit -v)";
    }
    return "";
}

Error out_of_memory_error(const std::string& memory, size_t bytes, const char* what, size_t held,
                          size_t buffers, const std::string& detail) {
    std::string m = "out of " + memory + " allocating " + std::to_string(bytes) + " bytes (" +
                    format_bytes(bytes) + ") for " + (what != nullptr ? what : "(unnamed)");
    if (!detail.empty()) m += " (" + detail + ")";
    m += "; this backend already holds " + format_bytes(held) + " in " + std::to_string(buffers) +
         (buffers == 1 ? " buffer" : " buffers") + "; " + kOutOfMemoryAdvice;
    return Error(ErrorCategory::kDevice, m);
}

namespace {

std::atomic<DeviceChoiceReporter> g_reporter{nullptr};
std::mutex g_choice_mutex;
std::string g_choice;  // the last "device auto -> ..." line
bool g_choice_reported = false;

// Records the choice of make_backend("auto") and hands it to the reporter once per process.
void note_auto_choice(const std::string& line) {
    bool report = false;
    {
        std::lock_guard<std::mutex> lock(g_choice_mutex);
        g_choice = line;
        report = !g_choice_reported && g_reporter.load() != nullptr;
        if (report) g_choice_reported = true;
    }
    if (report) {
        if (DeviceChoiceReporter r = g_reporter.load()) r(line);
    }
}

bool is_cuda_device(const std::string& d) {
    if (d == "cuda") return true;
    if (d.rfind("cuda:", 0) != 0 || d.size() == 5) return false;
    return std::all_of(d.begin() + 5, d.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

void set_device_choice_reporter(DeviceChoiceReporter reporter) {
    g_reporter.store(reporter);
}

std::string last_device_choice() {
    std::lock_guard<std::mutex> lock(g_choice_mutex);
    return g_choice;
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
    if (threads < 0) {
        throw Error(ErrorCategory::kUsage,
                    "thread count must be >= 0 (0 = all cores), got " + std::to_string(threads));
    }
    std::string d = device;
    std::transform(d.begin(), d.end(), d.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (d == "cpu") return std::make_unique<CpuBackend>(threads);
#ifdef SPARSENET_WITH_CUDA
    // "auto": the first GPU when the runtime reports one that can run this build's kernels (on
    // a machine without a driver cudaGetDeviceCount fails: that is "no GPU", not an error), else
    // the CPU. A GPU whose backend cannot be created (out of memory, ...) also falls back.
    if (d == "auto") {
        std::string why;
        const int count = cuda::device_count(&why);
        if (count == 0) {
            // No driver (cudaErrorInsufficientDriver / NoDevice) or a driver without devices.
            note_auto_choice("device auto -> cpu (no CUDA device: " + why + ")");
        } else if (!cuda::device_usable(0, &why)) {
            note_auto_choice("device auto -> cpu (the driver reports " + std::to_string(count) +
                             " CUDA device(s) but cuda:0 is not usable: " + why + ")");
        } else {
            try {
                std::unique_ptr<Backend> backend = cuda::create_backend(0);
                note_auto_choice("device auto -> cuda:0 (" + std::to_string(count) +
                                 " CUDA device(s) reported by the driver)");
                return backend;
            } catch (const Error& e) {
                note_auto_choice(
                    "device auto -> cpu (the driver reports " + std::to_string(count) +
                    " CUDA device(s) but the CUDA backend could not be created: " + e.what() + ")");
            }
        }
        return std::make_unique<CpuBackend>(threads);
    }
    if (is_cuda_device(d)) {
        const std::string digits = d.size() > 5 ? d.substr(5) : "0";
        const int index = digits.size() > 9 ? INT32_MAX : std::stoi(digits);
        std::string why;
        const int count = cuda::device_count(&why);
        if (count == 0) {
            throw Error(ErrorCategory::kDevice, "device '" + device + "': no usable CUDA device (" +
                                                    why + "); use --device cpu or auto");
        }
        if (index >= count) {
            throw Error(ErrorCategory::kDevice,
                        "device '" + device + "': no usable CUDA device with index " + digits +
                            " (this machine has " + std::to_string(count) + ": cuda:0 to cuda:" +
                            std::to_string(count - 1) + "); use --device cpu or auto");
        }
        if (!cuda::device_usable(index, &why)) {
            throw Error(ErrorCategory::kDevice, "device '" + device + "': no usable CUDA device: " +
                                                    why + "; use --device cpu or auto");
        }
        return cuda::create_backend(index);
    }
#else
    // This build has no CUDA backend, so "auto" always resolves to the CPU.
    if (d == "auto") {
        note_auto_choice("device auto -> cpu (this build has no CUDA backend)");
        return std::make_unique<CpuBackend>(threads);
    }
    if (is_cuda_device(d)) {
        throw Error(ErrorCategory::kDevice,
                    "device '" + device +
                        "': this build has no CUDA backend (configured without CUDA or nvcc "
                        "not found); use --device cpu or auto");
    }
#endif
    throw Error(ErrorCategory::kUsage, "unknown device '" + device +
                                           "': expected cpu, auto, cuda or cuda:N (N a GPU "
                                           "index)");
}

}  // namespace sparsenet
