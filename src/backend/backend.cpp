// The backend registry and the op names.
#include "backend/backend.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "backend/cpu/cpu_backend.h"
#include "backend/default_gpu.h"
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
        case Op::kSumSquares:
            return "sum_squares";
        case Op::kSparseStep:
            return "sparse_step";
        case Op::kCatchUpRows:
            return "catch_up_rows";
        case Op::kRoundBf16:
            return "round_bf16";
    }
    return "unknown";
}

uint64_t Backend::free_memory() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t kb = 0;
    std::string unit;
    while (in >> key >> kb >> unit) {
        if (key == "MemAvailable:") return kb * 1024;
    }
    return 0;
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
DeviceChoiceKind g_choice_kind = DeviceChoiceKind::kCpuNoGpu;
bool g_choice_reported = false;

// Records the choice of make_backend("auto") and hands it to the reporter once per process.
void note_auto_choice(const std::string& line, DeviceChoiceKind kind) {
    bool report = false;
    {
        std::lock_guard<std::mutex> lock(g_choice_mutex);
        g_choice = line;
        g_choice_kind = kind;
        report = !g_choice_reported && g_reporter.load() != nullptr;
        if (report) g_choice_reported = true;
    }
    if (report) {
        if (DeviceChoiceReporter r = g_reporter.load()) r(line, kind);
    }
}

// driver_reports_gpu: the CUDA driver counted a device (then a GPU is there, whatever sysfs says).
void note_auto_cpu_choice(const std::string& why, bool driver_reports_gpu) {
#ifdef SPARSENET_WITH_CUDA
    const bool cuda_build = true;
#else
    const bool cuda_build = false;
#endif
    const AutoChoice c =
        describe_auto_cpu_choice(driver_reports_gpu || nvidia_gpu_present(), cuda_build, why);
    note_auto_choice(c.line, c.kind);
}

std::string read_first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
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

DeviceChoiceKind last_device_choice_kind() {
    std::lock_guard<std::mutex> lock(g_choice_mutex);
    return g_choice_kind;
}

std::string cpu_bf16_kernel_line() {
    return cpu::bf16_choice().line;
}

bool nvidia_gpu_present() {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path driver_gpus = "/proc/driver/nvidia/gpus";
    if (fs::is_directory(driver_gpus, ec) && !fs::is_empty(driver_gpus, ec) && !ec) return true;
    if (fs::exists("/dev/nvidia0", ec)) return true;
    // PCI class 0x0300xx is a VGA controller, 0x0302xx a 3D controller (data-centre GPUs); NVIDIA
    // also makes audio functions and bridges, which are not GPUs.
    for (fs::directory_iterator it("/sys/bus/pci/devices", ec), end; !ec && it != end;
         it.increment(ec)) {
        if (read_first_line((it->path() / "vendor").string()) != "0x10de") continue;
        const std::string cls = read_first_line((it->path() / "class").string());
        if (cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0) return true;
    }
    return false;
}

AutoChoice describe_auto_cpu_choice(bool gpu_present, bool cuda_build, const std::string& why) {
    if (!cuda_build) {
        if (!gpu_present) {
            return {"device auto -> cpu (no NVIDIA GPU found; this build has no CUDA backend)",
                    DeviceChoiceKind::kCpuNoGpu};
        }
        return {
            "device auto -> cpu (an NVIDIA GPU is present, but this build has no CUDA "
            "backend: rebuild with the CUDA toolkit installed, docs/gpu.md)",
            DeviceChoiceKind::kCpuGpuNotUsable};
    }
    if (!gpu_present) {
        // The expected case on a laptop or a CPU server: the runtime's words stay in the line for
        // --verbose, in case the operating system hides a GPU that is there.
        return {"device auto -> cpu (no NVIDIA GPU found; the CUDA runtime: " + why + ")",
                DeviceChoiceKind::kCpuNoGpu};
    }
    return {"device auto -> cpu (an NVIDIA GPU is present but CUDA cannot use it: " + why + ")",
            DeviceChoiceKind::kCpuGpuNotUsable};
}

void prepare_backend_device(const std::string& device) {
    prepare_backend_device(device, DefaultGpu{});
}

void prepare_backend_device(const std::string& device, const DefaultGpu& gpu) {
#ifdef SPARSENET_WITH_CUDA
    std::string d = device;
    std::transform(d.begin(), d.end(), d.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (d != "auto" && !is_cuda_device(d)) return;
    const std::string digits = d.size() > 5 ? d.substr(5) : "";
    if (digits.size() > 9) return;
    const int index = digits.empty() ? gpu.index : std::stoi(digits);
    if (index < cuda::device_count(nullptr)) cuda::prepare_device(index);
#else
    (void)device;
    (void)gpu;
#endif
}

int cuda_device_count() {
#ifdef SPARSENET_WITH_CUDA
    return cuda::device_count(nullptr);
#else
    return 0;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
    return make_backend(device, threads, DefaultGpu{});
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      const DefaultGpu& gpu) {
    if (threads < 0) {
        throw Error(ErrorCategory::kUsage,
                    "thread count must be >= 0 (0 = all cores), got " + std::to_string(threads));
    }
    std::string d = device;
    std::transform(d.begin(), d.end(), d.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (d == "cpu") return std::make_unique<CpuBackend>(threads);
#ifdef SPARSENET_WITH_CUDA
    // "auto": the default GPU (GPU 0, or under mpirun the rank's own: default_gpu.h) when the
    // runtime reports it and it can run this build's kernels (on a machine without a driver
    // cudaGetDeviceCount fails: that is "no GPU", not an error), else the CPU. A GPU whose
    // backend cannot be created (out of memory, ...) also falls back.
    if (d == "auto") {
        std::string why;
        const int count = cuda::device_count(&why);
        const std::string name = "cuda:" + std::to_string(gpu.index);
        const std::string note = gpu.note.empty() ? "" : "; " + gpu.note;
        if (count == 0) {
            // No driver (cudaErrorInsufficientDriver / NoDevice) or a driver without devices:
            // expected without a GPU, worth a word with one (nvidia_gpu_present).
            note_auto_cpu_choice(why, false);
        } else if (gpu.index >= count) {
            note_auto_cpu_choice("the driver reports " + std::to_string(count) +
                                     " CUDA device(s), so there is no " + name + note,
                                 true);
        } else if (!cuda::device_usable(gpu.index, &why)) {
            note_auto_cpu_choice("the driver reports " + std::to_string(count) +
                                     " CUDA device(s) but " + name + " is not usable: " + why +
                                     note,
                                 true);
        } else {
            try {
                std::unique_ptr<Backend> backend = cuda::create_backend(gpu.index);
                note_auto_choice("device auto -> " + name + " (" + std::to_string(count) +
                                     " CUDA device(s) reported by the driver" + note + ")",
                                 DeviceChoiceKind::kGpu);
                return backend;
            } catch (const Error& e) {
                note_auto_cpu_choice(
                    "the driver reports " + std::to_string(count) +
                        " CUDA device(s) but the CUDA backend could not be created: " + e.what(),
                    true);
            }
        }
        return std::make_unique<CpuBackend>(threads);
    }
    if (is_cuda_device(d)) {
        // "cuda" alone: the default GPU (0, or the rank's own under mpirun).
        const std::string digits = d.size() > 5 ? d.substr(5) : std::to_string(gpu.index);
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
    (void)gpu;
    if (d == "auto") {
        note_auto_cpu_choice("", false);
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
