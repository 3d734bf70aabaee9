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

// make_backend("auto") always records which backend it took and why, and hands the line to an
// installed reporter once per process (the CLI prints it on stderr).
std::string g_reported;
int g_reports = 0;
void reporter(const std::string& line) {
    g_reported = line;
    ++g_reports;
}

TEST(DeviceAuto, SaysWhichBackendItTookAndWhy) {
    set_device_choice_reporter(reporter);
    const std::unique_ptr<Backend> a = make_backend("auto");
    const std::unique_ptr<Backend> b = make_backend("auto");
    set_device_choice_reporter(nullptr);
    EXPECT_EQ(g_reports, 1);  // once per process
    EXPECT_EQ(g_reported, last_device_choice());
    EXPECT_EQ(g_reported.rfind("device auto -> " + a->name() + " (", 0), 0u) << g_reported;
    if (a->name() == "cpu") {
        // Why not the GPU: no driver or device, an unusable device, or a build without CUDA.
        EXPECT_TRUE(contains(g_reported, "no CUDA device: ") ||
                    contains(g_reported, "is not usable") ||
                    contains(g_reported, "could not be created") ||
                    contains(g_reported, "this build has no CUDA backend"))
            << g_reported;
    }
    // make_backend("cpu") is not "auto": it says nothing.
    g_reports = 0;
    set_device_choice_reporter(reporter);
    make_backend("cpu");
    set_device_choice_reporter(nullptr);
    EXPECT_EQ(g_reports, 0);
}

}  // namespace
}  // namespace sparsenet
