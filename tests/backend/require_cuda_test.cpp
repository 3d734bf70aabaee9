// The CUDA tests' skip-or-fail policy (support/cuda_test_policy.h) and make_backend("auto")'s
// report of its choice, on the CPU: a CUDA test binary run with SPARSENET_REQUIRE_CUDA=1 on a
// machine without a GPU must FAIL, and without the variable it must skip. On a machine with a
// usable GPU the same binary must pass either way.
#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"
#include "support/cuda_test_policy.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::contains;
using testing::cuda_unavailable_policy;
using testing::CudaUnavailable;

TEST(CudaTestPolicy, SkipsOnlyWithoutAGpuAndWithoutTheRequirement) {
    EXPECT_EQ(cuda_unavailable_policy(false, 0), CudaUnavailable::kSkip);
    EXPECT_EQ(cuda_unavailable_policy(true, 0), CudaUnavailable::kFail);
    // A GPU the driver reports, but no backend: a broken setup, never a skip.
    EXPECT_EQ(cuda_unavailable_policy(false, 1), CudaUnavailable::kFail);
    EXPECT_EQ(cuda_unavailable_policy(true, 2), CudaUnavailable::kFail);
}

// Whether this machine can create the CUDA backend at all.
bool cuda_usable() {
    try {
        make_backend("cuda");
        return true;
    } catch (const Error&) {
        return false;
    }
}

#ifdef SPARSENET_CUDA_PARITY_TEST_PATH
// One cheap parity test, run as its own process like ctest runs it.
std::string parity_command(const std::string& env) {
    return env + " " + std::string(SPARSENET_CUDA_PARITY_TEST_PATH) +
           " --gtest_filter=CudaParity.RegistryNamesTheDevice";
}

TEST(CudaTestPolicy, RequiredCudaFailsWithoutAGpu) {
    std::string out;
    const int rc = testing::run_command(
        parity_command("env SPARSENET_REQUIRE_CUDA=1 SPARSENET_PARITY_DEVICE=cuda"), &out);
    if (cuda_usable()) {
        EXPECT_EQ(rc, 0) << out;
        return;
    }
    EXPECT_NE(rc, 0) << out;
    EXPECT_TRUE(contains(out, "FAILED")) << out;
    EXPECT_TRUE(contains(out, testing::cuda_driver_devices() > 0
                                  ? "but the CUDA backend cannot be created"
                                  : "SPARSENET_REQUIRE_CUDA=1 but there is no usable CUDA device"))
        << out;
}

TEST(CudaTestPolicy, WithoutTheRequirementAMachineWithoutAGpuSkips) {
    std::string out;
    const int rc = testing::run_command(
        parity_command("env -u SPARSENET_REQUIRE_CUDA SPARSENET_PARITY_DEVICE=cuda"), &out);
    if (testing::cuda_driver_devices() > 0 && !cuda_usable()) {
        EXPECT_NE(rc, 0) << out;  // a GPU whose backend cannot be created fails
        return;
    }
    EXPECT_EQ(rc, 0) << out;
    if (!cuda_usable()) {
        EXPECT_TRUE(contains(out, "SKIPPED")) << out;
    }
}
#else
TEST(CudaTestPolicy, RequiredCudaFailsWithoutAGpu) {
    GTEST_SKIP() << "this build has no CUDA tests";
}
#endif

// make_backend("auto") always records which backend it took and why, and hands the line and its
// kind to an installed reporter once per process (the CLI prints it on stderr, the CPU of a
// machine without a GPU only with --verbose).
std::string g_reported;
DeviceChoiceKind g_reported_kind = DeviceChoiceKind::kGpu;
int g_reports = 0;
void reporter(const std::string& line, DeviceChoiceKind kind) {
    g_reported = line;
    g_reported_kind = kind;
    ++g_reports;
}

TEST(DeviceAuto, SaysWhichBackendItTookAndWhy) {
    set_device_choice_reporter(reporter);
    const std::unique_ptr<Backend> a = make_backend("auto");
    const std::unique_ptr<Backend> b = make_backend("auto");
    set_device_choice_reporter(nullptr);
    EXPECT_EQ(g_reports, 1);  // once per process
    EXPECT_EQ(g_reported, last_device_choice());
    EXPECT_EQ(g_reported_kind, last_device_choice_kind());
    EXPECT_EQ(g_reported.rfind("device auto -> " + a->name() + " (", 0), 0u) << g_reported;
    if (a->name() == "cpu") {
        // Why not the GPU: none on this machine (the expected case), or one that is there but
        // cannot be used, with the reason.
        if (nvidia_gpu_present() || testing::cuda_driver_devices() > 0) {
            EXPECT_EQ(g_reported_kind, DeviceChoiceKind::kCpuGpuNotUsable) << g_reported;
            EXPECT_TRUE(contains(g_reported, "an NVIDIA GPU is present")) << g_reported;
        } else {
            EXPECT_EQ(g_reported_kind, DeviceChoiceKind::kCpuNoGpu) << g_reported;
            EXPECT_TRUE(contains(g_reported, "no NVIDIA GPU found")) << g_reported;
        }
    } else {
        EXPECT_EQ(g_reported_kind, DeviceChoiceKind::kGpu) << g_reported;
    }
    // make_backend("cpu") is not "auto": it says nothing.
    g_reports = 0;
    set_device_choice_reporter(reporter);
    make_backend("cpu");
    set_device_choice_reporter(nullptr);
    EXPECT_EQ(g_reports, 0);
}

// Every case of the CPU choice's line, whatever this machine has.
TEST(DeviceAuto, TheCpuOfAMachineWithoutAGpuIsTheExpectedCase) {
    const std::string runtime =
        "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version "
        "(cudaErrorInsufficientDriver)";
    const AutoChoice none = describe_auto_cpu_choice(false, true, runtime);
    EXPECT_EQ(none.kind, DeviceChoiceKind::kCpuNoGpu);
    EXPECT_EQ(none.line,
              "device auto -> cpu (no NVIDIA GPU found; the CUDA runtime: " + runtime + ")");
    const AutoChoice none_no_cuda = describe_auto_cpu_choice(false, false, "");
    EXPECT_EQ(none_no_cuda.kind, DeviceChoiceKind::kCpuNoGpu);
    EXPECT_EQ(none_no_cuda.line,
              "device auto -> cpu (no NVIDIA GPU found; this build has no CUDA backend)");
}

TEST(DeviceAuto, AGpuThatIsThereButNotUsableKeepsTheRuntimesWords) {
    const std::string runtime =
        "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version "
        "(cudaErrorInsufficientDriver)";
    const AutoChoice broken = describe_auto_cpu_choice(true, true, runtime);
    EXPECT_EQ(broken.kind, DeviceChoiceKind::kCpuGpuNotUsable);
    EXPECT_EQ(broken.line, "device auto -> cpu (an NVIDIA GPU is present but CUDA cannot use it: " +
                               runtime + ")");
    const AutoChoice no_cuda = describe_auto_cpu_choice(true, false, "");
    EXPECT_EQ(no_cuda.kind, DeviceChoiceKind::kCpuGpuNotUsable);
    EXPECT_TRUE(contains(no_cuda.line, "this build has no CUDA backend")) << no_cuda.line;
    EXPECT_TRUE(contains(no_cuda.line, "docs/gpu.md")) << no_cuda.line;
}

}  // namespace
}  // namespace sparsenet
