// The CUDA defects fixed by review (docs/kernels.md, "CUDA backend: defects fixed by review"), on
// a GPU: each test compares with the CPU backend or checks the reported error. Skips without a
// GPU, fails with one that cannot be used or with SPARSENET_REQUIRE_CUDA=1
// (support/cuda_test_policy.h). Passed on an H100 (benchmarks/results/gpu/2026-11-25-h100*.json).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/cuda_test_policy.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::contains;

std::unique_ptr<Backend> cuda_or_reason(std::string* reason) {
    try {
        return make_backend("cuda");
    } catch (const Error& e) {
        *reason = e.what();
        return nullptr;
    }
}

#define SPARSENET_NEED_CUDA(var)                                  \
    std::string var##_reason;                                     \
    std::unique_ptr<Backend> var = cuda_or_reason(&var##_reason); \
    if (!var) SPARSENET_CUDA_UNAVAILABLE(var##_reason)

template <class T>
DeviceArray<T> put(Backend& be, const std::vector<T>& v, const char* what) {
    DeviceArray<T> a(be, std::max<size_t>(v.size(), 1), what);
    if (!v.empty()) a.upload(v.data(), v.size());
    return a;
}
template <class T>
std::vector<T> get(const DeviceArray<T>& a, size_t n) {
    std::vector<T> v(n);
    if (n > 0) a.download(v.data(), n);
    return v;
}

// A random boolean CSR of `rows` rows over `cols` columns, `per_row` distinct entries a row.
Dataset random_csr(uint64_t rows, uint32_t cols, uint32_t per_row, uint64_t seed) {
    Dataset d;
    d.rows = rows;
    d.cols = cols;
    std::mt19937_64 rng(seed);
    for (uint64_t r = 0; r < rows; ++r) {
        std::vector<uint32_t> row;
        while (row.size() < per_row) {
            const uint32_t c = uint32_t(rng() % cols);
            if (std::find(row.begin(), row.end(), c) == row.end()) row.push_back(c);
        }
        std::sort(row.begin(), row.end());
        d.indices.insert(d.indices.end(), row.begin(), row.end());
        d.offsets.push_back(d.indices.size());
    }
    return d;
}

CsrBatchView view(const uint64_t* offsets, const uint32_t* indices, uint64_t rows, uint32_t cols) {
    CsrBatchView v;
    v.offsets = offsets;
    v.indices = indices;
    v.batch.first_row = 0;
    v.batch.batch = rows;
    v.cols = cols;
    return v;
}

// Item 4: csr_weight_grad on a 10M-wide input takes the sorted path (capacity < in) and matches the
// CPU: rows and count exactly, values within 1e-5 of the sum of |terms| (here <= 64 terms of
// |dz| <= 1).
TEST(CudaDefects, WeightGradOfATenMillionWideInputMatchesTheCpu) {
    SPARSENET_NEED_CUDA(dev);
    CpuBackend cpu(2);
    for (const uint32_t in : {10'000'000u, 300u}) {  // sorted path, then the dense one
        const Dataset x = random_csr(64, in, in > 1000 ? 40 : 30, in);
        const size_t out = 37, capacity = std::min<size_t>(in, x.nnz());
        std::vector<float> dz(64 * out);
        std::mt19937 rng(3);
        for (float& v : dz) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        // CPU.
        std::vector<uint32_t> rows_c(capacity), count_c(1);
        std::vector<float> values_c(capacity * out);
        cpu.csr_weight_grad(view(x.offsets.data(), x.indices.data(), 64, in), {},
                            {dz.data(), 64, out, out}, 0.5f,
                            {rows_c.data(), count_c.data(), values_c.data(), capacity, out});
        // Device.
        auto offsets = put(*dev, x.offsets, "offsets");
        auto indices = put(*dev, x.indices, "indices");
        auto dz_d = put(*dev, dz, "dz");
        DeviceArray<uint32_t> rows_d(*dev, capacity, "rows"), count_d(*dev, 1, "count");
        DeviceArray<float> values_d(*dev, capacity * out, "values");
        dev->csr_weight_grad(view(offsets.data(), indices.data(), 64, in), {},
                             {dz_d.data(), 64, out, out}, 0.5f,
                             {rows_d.data(), count_d.data(), values_d.data(), capacity, out});
        const uint32_t count = get(count_d, 1)[0];
        ASSERT_EQ(count, count_c[0]) << in;
        EXPECT_EQ(get(rows_d, count),
                  std::vector<uint32_t>(rows_c.begin(), rows_c.begin() + count));
        const std::vector<float> values = get(values_d, size_t(count) * out);
        for (size_t i = 0; i < values.size(); ++i)
            EXPECT_NEAR(values[i], values_c[i], 64 * 0.5 * 1e-5) << in << " " << i;
    }
}

// Item 6: csr_matmul's group mapping for outputs up to 128 wide gives the CPU's result (sum
// tolerance), beta 0.5, with every width around the group boundaries.
TEST(CudaDefects, CsrMatmulNarrowOutputsMatchTheCpu) {
    SPARSENET_NEED_CUDA(dev);
    CpuBackend cpu(2);
    const uint32_t in = 500;
    const Dataset x = random_csr(77, in, 9, 5);
    auto offsets = put(*dev, x.offsets, "offsets");
    auto indices = put(*dev, x.indices, "indices");
    for (size_t n : {1, 2, 3, 4, 5, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129}) {
        std::vector<float> w(in * n), z(77 * n);
        std::mt19937 rng{unsigned(n)};
        for (float& v : w) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        for (float& v : z) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        std::vector<float> z_cpu = z;
        cpu.csr_matmul(view(x.offsets.data(), x.indices.data(), 77, in), {}, {w.data(), in, n, n},
                       {z_cpu.data(), 77, n, n}, 0.5f);
        auto w_d = put(*dev, w, "w");
        auto z_d = put(*dev, z, "z");
        dev->csr_matmul(view(offsets.data(), indices.data(), 77, in), {}, {w_d.data(), in, n, n},
                        {z_d.data(), 77, n, n}, 0.5f);
        const std::vector<float> got = get(z_d, z.size());
        for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], z_cpu[i], 10 * 1e-5) << n;
    }
}

// Item 5: a target row holding a column twice is reported by the device at the next
// synchronisation, naming the row and the column, as the CPU throws at the call.
TEST(CudaDefects, OutputDeltaReportsARepeatedTargetColumn) {
    SPARSENET_NEED_CUDA(dev);
    const std::vector<uint64_t> offsets = {0, 1, 3};
    const std::vector<uint32_t> indices = {4, 6, 6};
    auto off_d = put(*dev, offsets, "offsets");
    auto idx_d = put(*dev, indices, "indices");
    auto a = put(*dev, std::vector<float>(20, 0.5f), "a");
    DeviceArray<float> delta(*dev, 20, "delta");
    formulas::LossParams p;
    p.kind = ErrorFunction::kL2;
    formulas::ActivationParams act;
    act.kind = Activation::kSigmoid;
    dev->output_delta(p, act, {a.data(), 2, 10, 10}, view(off_d.data(), idx_d.data(), 2, 10), 1.0f,
                      {delta.data(), 2, 10, 10}, nullptr);
    const std::string msg =
        testing::expect_error([&] { dev->synchronize(); }, ErrorCategory::kInternal);
    EXPECT_TRUE(contains(msg, "output_delta: target row 1: column 6 repeated or out of order"))
        << msg;
    dev->synchronize();  // the status was cleared by the report
}

// Item 2: SPARSENET_CUDA_SYNC_CHECK=1 synchronises after every launch and changes no result.
TEST(CudaDefects, SyncCheckModeComputesTheSame) {
    setenv("SPARSENET_CUDA_SYNC_CHECK", "1", 1);
    std::string reason;
    std::unique_ptr<Backend> checked = cuda_or_reason(&reason);
    unsetenv("SPARSENET_CUDA_SYNC_CHECK");
    if (!checked) SPARSENET_CUDA_UNAVAILABLE(reason);
    SPARSENET_NEED_CUDA(plain);
    const Dataset x = random_csr(33, 200, 7, 9);
    std::vector<float> w(200 * 300, 0.25f);
    std::vector<float> results[2];
    Backend* backends[2] = {checked.get(), plain.get()};
    for (int i = 0; i < 2; ++i) {
        auto offsets = put(*backends[i], x.offsets, "offsets");
        auto indices = put(*backends[i], x.indices, "indices");
        auto w_d = put(*backends[i], w, "w");
        DeviceArray<float> z(*backends[i], 33 * 300, "z");
        backends[i]->csr_matmul(view(offsets.data(), indices.data(), 33, 200), {},
                                {w_d.data(), 200, 300, 300}, {z.data(), 33, 300, 300}, 0.0f);
        results[i] = get(z, 33 * 300);
    }
    EXPECT_EQ(results[0], results[1]);
}

// Item 3: training on the GPU checks the guard every 16 batches; an exploding learning rate is
// still reported at the batch the CPU (checking every batch) names.
TEST(CudaDefects, WindowedGuardNamesTheCpusBatch) {
    SPARSENET_NEED_CUDA(dev);
    dev.reset();
    GenerateOptions g;
    g.users = 400;
    g.items = 60;
    g.nnz = 3600;
    g.seed = 8;
    Dataset in = generate(g).train, out = in;
    in.name = "in";
    out.name = "out";
    const NetworkConfig config = NetworkConfig::from_json(R"({"Kind": "FeedForward",
      "ErrorFunction": "CrossEntropy", "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 12, "Activation": "Relu"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid"}]})");
    std::string messages[2];
    const char* devices[2] = {"cpu", "cuda"};
    for (int i = 0; i < 2; ++i) {
        NetworkOptions no;
        no.device = devices[i];
        no.seed = 99;
        Network net = Network::create(config, {{"in", 60}, {"out", 60}}, no);
        TrainOptions o;
        o.epochs = 1;
        o.batch = 32;
        o.seed = 5;
        o.optimizer.learning_rate = 1e30f;
        Trainer t(net, {{"in", &in}, {"out", &out}}, o);
        messages[i] = testing::expect_error([&] { t.fit(); }, ErrorCategory::kNumeric);
    }
    EXPECT_EQ(messages[1].substr(0, messages[1].find(':')),
              messages[0].substr(0, messages[0].find(':')))
        << messages[0] << "\n"
        << messages[1];
    EXPECT_TRUE(contains(messages[1], "checked every 16 batches")) << messages[1];
}

}  // namespace
}  // namespace sparsenet
