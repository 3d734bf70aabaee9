// make_backend: the device registry, and the CPU backend's memory ops.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

ErrorCategory category_of(const std::string& device, std::string* message = nullptr) {
    try {
        make_backend(device);
    } catch (const Error& e) {
        if (message != nullptr) *message = e.what();
        return e.category();
    }
    ADD_FAILURE() << "make_backend(\"" << device << "\") did not throw";
    return ErrorCategory::kInternal;
}

TEST(BackendRegistry, CpuAndAutoGiveTheCpuBackend) {
    for (const char* device : {"cpu", "auto", "CPU", "Auto"}) {
        const std::unique_ptr<Backend> backend = make_backend(device);
        ASSERT_NE(backend, nullptr);
        const std::string name = backend->name();
        // "auto" picks the first GPU when the build has CUDA and the machine a usable GPU.
        if (std::string(device) == "auto" || std::string(device) == "Auto") {
            EXPECT_TRUE(name == "cpu" || name == "cuda:0") << device << ": " << name;
        } else {
            EXPECT_EQ(name, "cpu") << device;
        }
    }
}

TEST(BackendRegistry, ThreadCount) {
    std::unique_ptr<Backend> b = make_backend("cpu", 1);
    EXPECT_EQ(dynamic_cast<CpuBackend&>(*b).threads(), 1);
    b = make_backend("cpu", 0);
    EXPECT_GE(dynamic_cast<CpuBackend&>(*b).threads(), 1);
    try {
        make_backend("cpu", -1);
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    }
}

// Without CUDA in the build, or without a usable GPU, "cuda[:N]" is a device error that names
// the device and the way out (a machine with a GPU creates the backend: nothing to check here).
TEST(BackendRegistry, CudaWithoutAUsableGpuIsADeviceError) {
    for (const char* device : {"cuda", "cuda:0", "cuda:3", "cuda:99999999999"}) {
        std::string message;
        try {
            make_backend(device);
            continue;  // this machine has that GPU
        } catch (const Error& e) {
            message = e.what();
            EXPECT_EQ(e.category(), ErrorCategory::kDevice) << device;
        }
        EXPECT_NE(message.find(std::string("'") + device + "'"), std::string::npos) << message;
        EXPECT_TRUE(message.find("no CUDA backend") != std::string::npos ||
                    message.find("no usable CUDA device") != std::string::npos)
            << message;
        EXPECT_NE(message.find("--device cpu or auto"), std::string::npos) << message;
    }
}

TEST(BackendRegistry, UnknownDevicesAreUsageErrorsListingTheChoices) {
    for (const char* device : {"tpu", "", "cuda:", "cuda:x", "gpu", "cpu0"}) {
        std::string message;
        EXPECT_EQ(category_of(device, &message), ErrorCategory::kUsage) << device;
        for (const char* choice : {"cpu", "auto", "cuda"})
            EXPECT_NE(message.find(choice), std::string::npos) << message;
    }
}

TEST(BackendRegistry, OpNames) {
    EXPECT_STREQ(to_string(Op::kCsrMatmul), "csr_matmul");
    EXPECT_STREQ(to_string(Op::kCsrWeightGrad), "csr_weight_grad");
    EXPECT_STREQ(to_string(Op::kGemm), "gemm");
    EXPECT_STREQ(to_string(Op::kBiasActivationForward), "bias_activation_forward");
    EXPECT_STREQ(to_string(Op::kActivationBackward), "activation_backward");
    EXPECT_STREQ(to_string(Op::kColumnSum), "column_sum");
    EXPECT_STREQ(to_string(Op::kDropout), "dropout");
    EXPECT_STREQ(to_string(Op::kOutputDelta), "output_delta");
    EXPECT_STREQ(to_string(Op::kOptimizerStep), "optimizer_step");
    EXPECT_STREQ(to_string(Op::kOptimizerStepRows), "optimizer_step_rows");
    EXPECT_STREQ(to_string(Op::kTopK), "top_k");
    EXPECT_STREQ(to_string(Op::kSparsenessPenalty), "sparseness_penalty");
    EXPECT_STREQ(to_string(Op::kNormalizeRows), "normalize_rows");
    EXPECT_STREQ(to_string(Op::kNormalizeColumns), "normalize_columns");
}

TEST(CpuBackend, MemoryOps) {
    CpuBackend backend(2);
    for (size_t n : {size_t(1), size_t(1000), size_t(5) << 20}) {
        DeviceArray<float> a(backend, n, "test a"), b(backend, n, "test b");
        EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
        std::vector<float> host(n);
        std::iota(host.begin(), host.end(), 0.0f);
        a.upload(host.data(), n);
        backend.copy(b.data(), a.data(), n * sizeof(float));
        std::vector<float> back(n, -1.0f);
        b.download(back.data(), n);
        EXPECT_EQ(host, back);
        backend.fill(a.data(), n, 2.5f);
        a.download(back.data(), n);
        for (float v : back) ASSERT_EQ(v, 2.5f);
        backend.synchronize();
    }
    void* p = backend.allocate(0, "empty");
    backend.deallocate(p);
}

TEST(CpuBackend, OutOfMemoryIsADeviceErrorNamingTheBuffer) {
    CpuBackend backend(1);
    try {
        backend.allocate(std::numeric_limits<size_t>::max() / 2, "giant weights");
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kDevice);
        const std::string m = e.what();
        EXPECT_NE(m.find("out of host memory allocating"), std::string::npos) << m;
        EXPECT_NE(m.find("giant weights"), std::string::npos) << m;
        EXPECT_NE(m.find(std::to_string(std::numeric_limits<size_t>::max() / 2)), std::string::npos)
            << m;
    }
}

}  // namespace
}  // namespace sparsenet
