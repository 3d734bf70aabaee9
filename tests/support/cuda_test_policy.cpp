#include "support/cuda_test_policy.h"

#include <cstdlib>
#include <cstring>

#ifdef SPARSENET_TEST_WITH_CUDA
#include "backend/cuda/cuda_registry.h"
#endif

namespace sparsenet::testing {

namespace {
// The CUDA backend uses TF32 tensor cores unless SPARSENET_CUDA_TF32=0; the CUDA tests compare
// against the FP32 CPU reference at FP32 tolerances, so they run exact FP32 unless the
// environment names a precision itself. Set before main(), before any backend exists.
[[maybe_unused]] const bool exact_fp32_for_tests = [] {
    setenv("SPARSENET_CUDA_TF32", "0", /*overwrite=*/0);
    return true;
}();
}  // namespace

CudaUnavailable cuda_unavailable_policy(bool require_env, int driver_devices) {
    return require_env || driver_devices > 0 ? CudaUnavailable::kFail : CudaUnavailable::kSkip;
}

bool cuda_required_by_env() {
    const char* v = std::getenv("SPARSENET_REQUIRE_CUDA");
    return v != nullptr && std::strcmp(v, "1") == 0;
}

int cuda_driver_devices(std::string* why) {
#ifdef SPARSENET_TEST_WITH_CUDA
    return cuda::device_count(why);
#else
    if (why != nullptr) *why = "this build has no CUDA backend";
    return 0;
#endif
}

std::string cuda_unavailable_message(CudaUnavailable decision, const std::string& reason) {
    if (decision == CudaUnavailable::kSkip) return "no usable CUDA device: " + reason;
    std::string why;
    const int devices = cuda_driver_devices(&why);
    if (devices > 0) {
        return "the driver reports " + std::to_string(devices) +
               " CUDA device(s) but the CUDA backend cannot be created (a broken setup, not a "
               "machine without a GPU): " +
               reason;
    }
    return "SPARSENET_REQUIRE_CUDA=1 but there is no usable CUDA device: " + reason;
}

}  // namespace sparsenet::testing
