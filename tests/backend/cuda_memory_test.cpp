// The CUDA backend's memory ops (allocate, upload, download, copy, fill; out of memory; the
// device registry) against the CPU backend, on the parity harness (backend/parity_harness.h:
// skips without a GPU, fails with SPARSENET_REQUIRE_CUDA=1 or a GPU that cannot be used).
#include "backend/parity_harness.h"

namespace sparsenet::parity {
namespace {

// ---- memory ----

TEST_F(CudaParity, MemoryOpsRoundTrip) {
    // Sizes below, at and above the 4 MiB staging buffers (two of them: 20 MB pipelines 5 chunks).
    for (size_t n : {size_t(1), size_t(1000), size_t(1) << 20, size_t(5) << 20}) {
        DeviceArray<float> a(dev(), n, "test a"), b(dev(), n, "test b");
        std::vector<float> host(n);
        std::iota(host.begin(), host.end(), 0.5f);
        a.upload(host.data(), n);
        dev().copy(b.data(), a.data(), n * sizeof(float));
        std::vector<float> back(n, -1.0f);
        b.download(back.data(), n);
        ASSERT_EQ(host, back) << n;
        dev().fill(a.data(), n, 2.5f);
        a.download(back.data(), n);
        for (float v : back) ASSERT_EQ(v, 2.5f);
        // An upload after compute work that reads the same buffer: ordered (no stale reads).
        dev().fill(b.data(), n, -1.0f);
        b.upload(host.data(), n);
        b.download(back.data(), n);
        ASSERT_EQ(host, back) << n;
        dev().synchronize();
    }
    void* p = dev().allocate(0, "empty");
    ASSERT_NE(p, nullptr);
    dev().deallocate(p);
}

TEST_F(CudaParity, OutOfMemoryIsADeviceErrorNamingTheBuffer) {
    const size_t huge = std::numeric_limits<size_t>::max() / 4;
    try {
        dev().allocate(huge, "giant weights");
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kDevice);
        const std::string m = e.what();
        EXPECT_NE(m.find("giant weights"), std::string::npos) << m;
        EXPECT_NE(m.find(std::to_string(huge)), std::string::npos) << m;
    }
    // The backend still works afterwards.
    DeviceArray<float> a(dev(), 10, "after");
    dev().fill(a.data(), 10, 1.0f);
    EXPECT_EQ(fetch(a, 10)[9], 1.0f);
}

TEST_F(CudaParity, RegistryNamesTheDevice) {
    if (parity_device() == "cpu") GTEST_SKIP() << "self-check mode";
    EXPECT_EQ(dev().name().rfind("cuda:", 0), 0u) << dev().name();
    EXPECT_EQ(make_backend("auto")->name().rfind("cuda:", 0), 0u);
    EXPECT_EQ(last_device_choice().rfind("device auto -> cuda:0 (", 0), 0u) << last_device_choice();
    try {
        make_backend("cuda:999");
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kDevice);
        EXPECT_NE(std::string(e.what()).find("no usable CUDA device with index 999"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace sparsenet::parity
