// The backend registry and the op names.
#include "backend/backend.h"

#include <algorithm>
#include <cctype>

#include "backend/cpu/cpu_backend.h"
#include "sparsenet/error.h"

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
    }
    return "unknown";
}

namespace {

bool is_cuda_device(const std::string& d) {
    if (d == "cuda") return true;
    if (d.rfind("cuda:", 0) != 0 || d.size() == 5) return false;
    return std::all_of(d.begin() + 5, d.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
    if (threads < 0) {
        throw Error(ErrorCategory::kUsage,
                    "thread count must be >= 0 (0 = all cores), got " + std::to_string(threads));
    }
    std::string d = device;
    std::transform(d.begin(), d.end(), d.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    // This build has no CUDA backend yet, so "auto" always resolves to the CPU.
    if (d == "cpu" || d == "auto") return std::make_unique<CpuBackend>(threads);
    if (is_cuda_device(d)) {
        throw Error(ErrorCategory::kDevice,
                    "device '" + device +
                        "': this build has no CUDA backend yet; use --device cpu or auto");
    }
    throw Error(ErrorCategory::kUsage, "unknown device '" + device +
                                           "': expected cpu, auto, cuda or cuda:N (N a GPU "
                                           "index)");
}

}  // namespace sparsenet
