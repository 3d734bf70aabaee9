// CPU vs CUDA parity: every op of the backend op table (src/backend/backend.h) run on the CPU
// backend (the reference) and on the CUDA backend with the same inputs, over a grid of shapes
// (empty rows, single nonzeros, power-law rows, widths that are not multiples of 32, padded
// leading dimensions, permuted and offset batches), every activation, loss and optimizer; then a
// full training run of two small networks on both devices.
//
// Every test skips (GTEST_SKIP, "no usable CUDA device: <why>") when make_backend("cuda") fails
// on a machine without a driver or GPU, and in builds without CUDA; it FAILS instead when the
// driver reports a GPU (a broken setup must not look green) or SPARSENET_REQUIRE_CUDA=1
// (support/cuda_test_policy.h). Nothing here passes without a GPU. SPARSENET_PARITY_DEVICE=cpu runs
// the same comparisons against a second CPU backend (one thread): a self-check of this harness
// only, not of the CUDA backend.
//
// Tolerances (docs/kernels.md, "CUDA backend"):
//  * element-wise ops (activations, optimizer steps, deltas): relative 1e-5 of (|cpu| + 5% of
//    the output's largest |cpu|), i.e. an absolute floor of 5e-7 of the output's scale: the
//    device contracts a*b+c into fused multiply-adds, which differs from the CPU's two roundings
//    by up to an ulp of the larger term when the result cancels;
//  * sums of products (csr_matmul, csr_weight_grad, scatter): 1e-5 of the sum of |terms|;
//  * GEMM (cuBLAS, fp32 math): 1e-4 of the sum of |terms|;
//  * reductions in double (column_sum, norms, penalty, loss sums): relative 1e-5;
//  * exact: csr_weight_grad's rows and count, top_k (indices and score bits), untouched padding
//    and rows that the op must not write, run-to-run determinism on the device;
//  * training: per-epoch losses within 1e-4 (first epoch) and 2e-3 (later epochs) relative,
//    weights within 2e-3 of their largest magnitude, scores within 2e-3 of the row's top score,
//    and every item of the device's top-K has a CPU score within twice the row's largest score
//    difference of the CPU's K-th score (rankings may differ only among near-ties).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "formulas/dropout.h"
#include "formulas/optimizer.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/cuda_test_policy.h"

namespace sparsenet {
namespace {

using testing::Dense;
using testing::RowShape;
using testing::TestBatch;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kPad = 12345.0f;

std::string parity_device() {
    const char* d = std::getenv("SPARSENET_PARITY_DEVICE");
    return d != nullptr && *d != '\0' ? d : "cuda";
}

// ---- the device under test ----

class CudaParity : public ::testing::Test {
  public:
    static void SetUpTestSuite() {
        if (probed_) return;
        probed_ = true;
        const std::string device = parity_device();
        try {
            if (device == "cpu") {
                device_backend_ = std::make_unique<CpuBackend>(1);
            } else {
                device_backend_ = make_backend(device);
            }
        } catch (const Error& e) {
            reason_ = e.what();
        }
    }
    static void TearDownTestSuite() { device_backend_.reset(); }

  protected:
    void SetUp() override {
        if (!device_backend_) SPARSENET_CUDA_UNAVAILABLE(reason_);
    }
    Backend& dev() { return *device_backend_; }
    CpuBackend cpu_{2};

  private:
    static inline bool probed_ = false;
    static inline std::unique_ptr<Backend> device_backend_;
    static inline std::string reason_;
};

// ---- device copies of host data ----

// A Dense<float> (padding included) in device memory.
struct DevMat {
    DeviceArray<float> buf;
    size_t rows = 0, cols = 0, ld = 0, count = 0;
    DevMat(Backend& be, const Dense<float>& h)
        : buf(be, std::max<size_t>(h.data.size(), 1), "test matrix"),
          rows(h.rows),
          cols(h.cols),
          ld(h.ld),
          count(h.data.size()) {
        if (count > 0) buf.upload(h.data.data(), count);
    }
    MatrixView view() { return {buf.data(), rows, cols, ld}; }
    ConstMatrixView cview() const { return ConstMatrixView(buf.data(), rows, cols, ld); }
    Dense<float> get(const Dense<float>& like) const {
        Dense<float> out = like;
        if (count > 0) buf.download(out.data.data(), count);
        return out;
    }
};

template <class T>
DeviceArray<T> dev_array(Backend& be, const std::vector<T>& host, const char* what) {
    DeviceArray<T> a(be, std::max<size_t>(host.size(), 1), what);
    if (!host.empty()) a.upload(host.data(), host.size());
    return a;
}

template <class T>
std::vector<T> fetch(const DeviceArray<T>& a, size_t n) {
    std::vector<T> out(n);
    if (n > 0) a.download(out.data(), n);
    return out;
}

// A CSR dataset and one batch of it in device memory, with the matching host view.
struct DevCsr {
    DeviceArray<uint64_t> offsets;
    DeviceArray<uint32_t> indices;
    DeviceArray<float> values, weights;
    DeviceArray<uint32_t> rows;
    CsrBatchView view;  // device pointers
    CsrBatchView host;  // host pointers (into the Dataset, TestBatch and weights given)

    DevCsr(Backend& be, const Dataset& d, const TestBatch& b, uint32_t col_offset = 0,
           const std::vector<float>* example_weights = nullptr)
        : offsets(dev_array(be, d.offsets, "test offsets")),
          indices(dev_array(be, d.indices, "test indices")),
          values(dev_array(be, d.values, "test values")),
          weights(dev_array(be,
                            example_weights != nullptr ? *example_weights : std::vector<float>(),
                            "test weights")),
          rows(dev_array(be, b.rows, "test batch rows")) {
        host = testing::csr_view(d, b, col_offset);
        if (example_weights != nullptr) host.weights = example_weights->data();
        view = host;
        view.offsets = offsets.data();
        view.indices = indices.data();
        view.values = d.values.empty() ? nullptr : values.data();
        view.weights = example_weights != nullptr ? weights.data() : nullptr;
        view.batch.rows = b.rows.empty() ? nullptr : rows.data();
    }
};

// A SparseRowGrad with its storage, on one backend.
struct RowGrad {
    DeviceArray<uint32_t> rows, count;
    DeviceArray<float> values;
    size_t capacity = 0, cols = 0;
    RowGrad(Backend& be, size_t cap, size_t n)
        : rows(be, std::max<size_t>(cap, 1), "test grad rows"),
          count(be, 1, "test grad count"),
          values(be, std::max<size_t>(cap * n, 1), "test grad values"),
          capacity(cap),
          cols(n) {
        const uint32_t zero = 0;
        count.upload(&zero, 1);
    }
    SparseRowGrad view() { return {rows.data(), count.data(), values.data(), capacity, cols}; }
    uint32_t get_count() const { return fetch(count, 1)[0]; }
};

// ---- comparisons ----

double max_abs(const Dense<float>& m) {
    double x = 0;
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t c = 0; c < m.cols; ++c)
            if (std::isfinite(m.at(r, c))) x = std::max(x, double(std::fabs(m.at(r, c))));
    return x;
}

uint32_t bits(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
}

// Padding (and the extra element) of both results must be the untouched input, bit for bit.
::testing::AssertionResult same_padding(const Dense<float>& want, const Dense<float>& got) {
    for (size_t i = 0; i < want.data.size(); ++i) {
        const size_t r = i / std::max<size_t>(want.ld, 1), c = i % std::max<size_t>(want.ld, 1);
        if (r < want.rows && c < want.cols) continue;
        if (bits(want.data[i]) != bits(got.data[i]))
            return ::testing::AssertionFailure() << "padding element " << i << " changed";
    }
    return ::testing::AssertionSuccess();
}

// |got - want| <= rel * (|want| + floor_frac * max|want|) + abs at every element; NaN must match.
::testing::AssertionResult close_dense(const Dense<float>& want, const Dense<float>& got,
                                       double rel, double floor_frac = 0.05, double abs = 0.0) {
    const double floor = floor_frac * max_abs(want);
    for (size_t r = 0; r < want.rows; ++r)
        for (size_t c = 0; c < want.cols; ++c) {
            const double w = want.at(r, c), g = got.at(r, c);
            if (std::isnan(w) || std::isnan(g)) {
                if (std::isnan(w) != std::isnan(g))
                    return ::testing::AssertionFailure()
                           << "(" << r << "," << c << ") cpu " << w << " device " << g;
                continue;
            }
            if (std::isinf(w) || std::isinf(g)) {
                if (w != g)
                    return ::testing::AssertionFailure()
                           << "(" << r << "," << c << ") cpu " << w << " device " << g;
                continue;
            }
            if (std::fabs(g - w) > rel * (std::fabs(w) + floor) + abs)
                return ::testing::AssertionFailure()
                       << "(" << r << "," << c << ") cpu " << w << " device " << g << " diff "
                       << std::fabs(g - w);
        }
    return same_padding(want, got);
}

// |got - want| <= rel * mag + abs with mag the sum of |terms| of each element.
::testing::AssertionResult close_by_magnitude(const Dense<float>& want, const Dense<float>& got,
                                              const Dense<float>& mag, double rel,
                                              double abs = 1e-6) {
    for (size_t r = 0; r < want.rows; ++r)
        for (size_t c = 0; c < want.cols; ++c) {
            const double w = want.at(r, c), g = got.at(r, c);
            if (!(std::fabs(g - w) <= rel * double(mag.at(r, c)) + abs))
                return ::testing::AssertionFailure()
                       << "(" << r << "," << c << ") cpu " << w << " device " << g << " magnitude "
                       << mag.at(r, c);
        }
    return same_padding(want, got);
}

bool close_scalar(double want, double got, double rel, double abs = 1e-9) {
    return std::fabs(got - want) <= rel * std::fabs(want) + abs;
}

Dense<float> abs_of(const Dense<float>& m) {
    Dense<float> a = m;
    for (float& v : a.data) v = std::fabs(v);
    return a;
}

formulas::ActivationParams act_params(Activation kind) {
    formulas::ActivationParams p;
    p.kind = kind;
    p.slope = 0.2f;
    p.alpha = 0.8f;
    p.lambda = 1.1f;
    return p;
}

constexpr int kActivations = int(Activation::kSoftSign) + 1;
constexpr int kLosses = int(ErrorFunction::kDataScaledMarginalCrossEntropy) + 1;
constexpr int kOptimizers = int(OptimizerKind::kAdamW) + 1;

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

// ---- csr_matmul ----

struct MatmulCase {
    size_t batch;
    uint32_t in;
    size_t out;
    RowShape shape;
    bool valued, permuted;
    float p, beta;
    uint32_t col_offset;
    uint64_t seed;
};

void run_matmul(Backend& cpu, Backend& dev, const MatmulCase& c) {
    const std::string what = testing::case_name(c.shape, c.valued, c.batch, c.out, c.permuted) +
                             " in=" + std::to_string(c.in) + " p=" + std::to_string(c.p) +
                             " beta=" + std::to_string(c.beta);
    const Dataset d = testing::random_dataset(c.batch + 4, c.in, c.shape, c.valued, c.seed);
    const TestBatch batch = testing::make_batch(d.rows, c.batch, c.permuted, c.seed + 1);
    const Dense<float> w = testing::random_dense<float>(c.in, c.out, 2, c.seed + 2);
    Dense<float> z = testing::random_dense<float>(c.batch, c.out, 3, c.seed + 3, -1, 1, kPad);
    if (c.beta == 0.0f)
        for (size_t b = 0; b < c.batch; ++b)
            for (size_t o = 0; o < c.out; ++o) z.at(b, o) = kNaN;
    SparseNoise noise;
    noise.p = c.p;
    noise.seed = c.seed * 7919 + 11;

    DevCsr x(dev, d, batch, c.col_offset);
    DevMat wd(dev, w), zd(dev, z);
    dev.csr_matmul(x.view, noise, wd.cview(), zd.view(), c.beta);
    const Dense<float> got = zd.get(z);

    Dense<float> want = z;
    cpu.csr_matmul(x.host, noise, w.cview(), want.view(), c.beta);
    // Magnitude: the same product on |w| (values are positive), plus |beta * z|.
    Dense<float> mag = z;
    for (size_t b = 0; b < c.batch; ++b)
        for (size_t o = 0; o < c.out; ++o)
            mag.at(b, o) = c.beta == 0.0f ? 0.0f : std::fabs(c.beta * z.at(b, o));
    const Dense<float> wabs = abs_of(w);
    cpu.csr_matmul(x.host, noise, wabs.cview(), mag.view(), 1.0f);
    ASSERT_TRUE(close_by_magnitude(want, got, mag, 1e-5)) << what;
}

TEST_F(CudaParity, CsrMatmulOverGrid) {
    int cases = 0;
    for (size_t batch : {1, 7, 64, 300})
        for (size_t out : {1, 33, 130, 600})
            for (RowShape shape : testing::kAllShapes)
                for (bool valued : {false, true})
                    for (bool permuted : {false, true})
                        for (float p : {0.0f, 0.3f})
                            for (float beta : {0.0f, 1.0f, 0.5f}) {
                                const MatmulCase c{batch,
                                                   50,
                                                   out,
                                                   shape,
                                                   valued,
                                                   permuted,
                                                   p,
                                                   beta,
                                                   permuted ? 17u : 0u,
                                                   uint64_t(++cases)};
                                run_matmul(cpu_, dev(), c);
                                if (HasFatalFailure()) return;
                            }
    // A wide input (long power-law rows: > 128 entries staged per block) and a wide output.
    run_matmul(cpu_, dev(), {64, 5000, 1100, RowShape::kPowerLaw, true, true, 0.2f, 0.0f, 3, 99});
}

// ---- csr_weight_grad ----

struct GradCase {
    size_t batch;
    uint32_t in;
    size_t out;
    RowShape shape;
    bool valued, permuted;
    float p;
    bool capacity_at_least_in;
    uint64_t seed;
};

void run_weight_grad(Backend& cpu, Backend& dev, const GradCase& c) {
    const std::string what = testing::case_name(c.shape, c.valued, c.batch, c.out, c.permuted) +
                             " in=" + std::to_string(c.in) + " p=" + std::to_string(c.p);
    const Dataset d = testing::random_dataset(c.batch + 4, c.in, c.shape, c.valued, c.seed);
    const TestBatch batch = testing::make_batch(d.rows, c.batch, c.permuted, c.seed + 1);
    const Dense<float> dz = testing::random_dense<float>(c.batch, c.out, 5, c.seed + 2);
    size_t nnz = 0;
    for (size_t b = 0; b < c.batch; ++b)
        nnz += d.offsets[batch.example(b) + 1] - d.offsets[batch.example(b)];
    const size_t capacity = c.capacity_at_least_in ? size_t(c.in) + 5 : std::min<size_t>(c.in, nnz);
    SparseNoise noise;
    noise.p = c.p;
    noise.seed = c.seed * 31 + 7;
    const float alpha = 0.75f;

    // CPU, on host memory.
    std::vector<uint32_t> rows_c(std::max<size_t>(capacity, 1)), count_c(1, 99);
    std::vector<float> values_c(std::max<size_t>(capacity * c.out, 1));
    SparseRowGrad gc{rows_c.data(), count_c.data(), values_c.data(), capacity, c.out};
    const CsrBatchView host = testing::csr_view(d, batch, 5);
    cpu.csr_weight_grad(host, noise, dz.cview(), alpha, gc);
    // Magnitude: the same gradient of |dz|.
    std::vector<uint32_t> rows_m(rows_c.size()), count_m(1);
    std::vector<float> values_m(values_c.size());
    SparseRowGrad gm{rows_m.data(), count_m.data(), values_m.data(), capacity, c.out};
    const Dense<float> dz_abs = abs_of(dz);
    cpu.csr_weight_grad(host, noise, dz_abs.cview(), alpha, gm);

    // Device, twice (determinism).
    DevCsr x(dev, d, batch, 5);
    DevMat dzd(dev, dz);
    RowGrad g(dev, capacity, c.out);
    std::vector<float> first;
    for (int run = 0; run < 2; ++run) {
        dev.fill(g.values.data(), g.values.size(), kNaN);  // overwrite semantics
        dev.csr_weight_grad(x.view, noise, dzd.cview(), alpha, g.view());
        const uint32_t count = g.get_count();
        ASSERT_EQ(count, count_c[0]) << what;
        const std::vector<uint32_t> rows = fetch(g.rows, count);
        ASSERT_TRUE(std::equal(rows.begin(), rows.end(), rows_c.begin())) << what;
        const std::vector<float> values = fetch(g.values, size_t(count) * c.out);
        for (size_t i = 0; i < values.size(); ++i)
            ASSERT_LE(std::fabs(values[i] - values_c[i]), 1e-5 * values_m[i] + 1e-6)
                << what << " element " << i << " cpu " << values_c[i] << " device " << values[i];
        if (run == 0) {
            first = values;
        } else {
            ASSERT_EQ(0, std::memcmp(first.data(), values.data(), values.size() * sizeof(float)))
                << what << ": two device runs differ";
        }
    }
}

TEST_F(CudaParity, CsrWeightGradOverGrid) {
    int cases = 0;
    for (size_t batch : {1, 7, 64, 1500})
        for (size_t out : {1, 33, 130})
            for (RowShape shape : testing::kAllShapes)
                for (bool valued : {false, true})
                    for (float p : {0.0f, 0.3f})
                        for (bool cap_in : {false, true}) {
                            const bool permuted = (cases % 2) == 0;
                            run_weight_grad(cpu_, dev(),
                                            {batch, 40, out, shape, valued, permuted, p, cap_in,
                                             uint64_t(++cases)});
                            if (HasFatalFailure()) return;
                        }
    // Wide inputs: capacity < in (one tile of pairs bounded by nnz), and capacity >= in with
    // B * in above the pair budget (several tiles of rows).
    run_weight_grad(cpu_, dev(), {300, 3000, 65, RowShape::kPowerLaw, true, true, 0.2f, false, 7});
    run_weight_grad(cpu_, dev(), {1000, 20000, 33, RowShape::kUniform, false, true, 0.0f, true, 8});
}

TEST_F(CudaParity, CsrWeightGradCapacityTooSmallIsReported) {
    const Dataset d = testing::random_dataset(20, 40, RowShape::kUniform, false, 3);
    const TestBatch batch = testing::make_batch(d.rows, 16, false, 4);
    const Dense<float> dz = testing::random_dense<float>(16, 8, 0, 5);
    DevCsr x(dev(), d, batch);
    DevMat dzd(dev(), dz);
    RowGrad g(dev(), 2, 8);  // the batch touches far more than 2 rows
    try {
        dev().csr_weight_grad(x.view, SparseNoise{}, dzd.cview(), 1.0f, g.view());
        dev().synchronize();  // the CUDA backend reports it here (the CPU at the call)
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInternal);
        // The CPU says "the batch touches N rows but the gradient capacity is 2"; the device may
        // find it first as a tile overflowing the scratch sized by that capacity ("... the
        // gradient capacity must be >= ..."), as on the first H100 run.
        EXPECT_NE(std::string(e.what()).find("gradient capacity"), std::string::npos) << e.what();
    }
    dev().synchronize();  // reported once
}

// ---- gemm ----

TEST_F(CudaParity, GemmEveryTransposeAndShape) {
    struct Shape {
        size_t m, n, k;
    };
    int cases = 0;
    for (const Shape s : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{64, 130, 33}, Shape{300, 70, 513},
                          Shape{3, 600, 27}, Shape{5, 9, 0}})
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (float beta : {0.0f, 1.0f, 0.5f})
                    for (float alpha : {1.0f, -0.7f}) {
                        const uint64_t seed = uint64_t(++cases) * 13;
                        const Dense<float> a = ta ? testing::random_dense<float>(s.k, s.m, 2, seed)
                                                  : testing::random_dense<float>(s.m, s.k, 2, seed);
                        const Dense<float> b =
                            tb ? testing::random_dense<float>(s.n, s.k, 1, seed + 1)
                               : testing::random_dense<float>(s.k, s.n, 1, seed + 1);
                        Dense<float> c =
                            testing::random_dense<float>(s.m, s.n, 3, seed + 2, -1, 1, kPad);
                        if (beta == 0.0f)
                            for (size_t r = 0; r < s.m; ++r)
                                for (size_t j = 0; j < s.n; ++j) c.at(r, j) = kNaN;
                        DevMat ad(dev(), a), bd(dev(), b), cd(dev(), c);
                        dev().gemm(ta, tb, alpha, ad.cview(), bd.cview(), beta, cd.view());
                        const Dense<float> got = cd.get(c);
                        Dense<float> want = c;
                        cpu_.gemm(ta, tb, alpha, a.cview(), b.cview(), beta, want.view());
                        Dense<float> mag = c;
                        for (size_t r = 0; r < s.m; ++r)
                            for (size_t j = 0; j < s.n; ++j)
                                mag.at(r, j) = beta == 0.0f ? 0.0f : std::fabs(beta * c.at(r, j));
                        const Dense<float> aa = abs_of(a), ba = abs_of(b);
                        cpu_.gemm(ta, tb, std::fabs(alpha), aa.cview(), ba.cview(), 1.0f,
                                  mag.view());
                        ASSERT_TRUE(close_by_magnitude(want, got, mag, 1e-4))
                            << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta
                            << " tb=" << tb << " beta=" << beta << " alpha=" << alpha;
                    }
}

// ---- activations ----

TEST_F(CudaParity, BiasActivationForwardEveryActivation) {
    struct Shape {
        size_t rows, cols;
    };
    int cases = 0;
    for (int k = 0; k < kActivations; ++k)
        for (const Shape s :
             {Shape{1, 1}, Shape{7, 5}, Shape{64, 130}, Shape{3, 1000}, Shape{33, 4099}})
            for (bool with_bias : {false, true}) {
                const formulas::ActivationParams act = act_params(Activation(k));
                const uint64_t seed = uint64_t(++cases);
                const Dense<float> z0 =
                    testing::random_dense<float>(s.rows, s.cols, 3, seed, -4, 4, kPad);
                std::vector<float> bias(s.cols);
                std::mt19937_64 rng(seed);
                for (float& v : bias) v = float(int(rng() % 200) - 100) / 50.0f;
                DevMat zd(dev(), z0);
                DeviceArray<float> bd = dev_array(dev(), bias, "test bias");
                dev().bias_activation_forward(act, with_bias ? bd.data() : nullptr, zd.view());
                Dense<float> want = z0;
                cpu_.bias_activation_forward(act, with_bias ? bias.data() : nullptr, want.view());
                ASSERT_TRUE(close_dense(want, zd.get(z0), 1e-5, 0.05))
                    << to_string(Activation(k)) << " " << s.rows << "x" << s.cols
                    << (with_bias ? " bias" : "");
            }
}

TEST_F(CudaParity, ActivationBackwardWithAndWithoutDropoutMask) {
    int cases = 0;
    for (int k = 0; k < kActivations; ++k) {
        const Activation kind = Activation(k);
        const formulas::ActivationParams act = act_params(kind);
        if (kind == Activation::kSoftMax) {
            Dense<float> a(2, 3), d(2, 3);
            DevMat ad(dev(), a), dd(dev(), d);
            try {
                dev().activation_backward(act, ad.cview(), nullptr, dd.view());
                FAIL() << "SoftMax must be refused";
            } catch (const Error& e) {
                EXPECT_EQ(e.category(), ErrorCategory::kInternal);
            }
            continue;
        }
        for (size_t cols : {1, 5, 130, 1001})
            for (int mask_kind : {0, 1, 2})  // none, inverted, alpha (the ELU/SELU kind)
                for (bool permuted : {false, true}) {
                    const uint64_t seed = uint64_t(++cases) * 3;
                    const size_t rows = 37;
                    Dense<float> a = testing::random_dense<float>(rows, cols, 2, seed, -3, 3, kPad);
                    cpu_.bias_activation_forward(act, nullptr, a.view());  // valid outputs
                    const TestBatch batch = testing::make_batch(rows + 10, rows, permuted, seed);
                    DropoutMask mask;
                    mask.rows = batch.view();
                    mask.col_offset = permuted ? 9 : 0;
                    if (mask_kind == 1) mask.params = formulas::inverted_dropout(0.3f, seed);
                    if (mask_kind == 2)
                        mask.params = formulas::alpha_dropout(0.2f, seed, -act.lambda * act.alpha);
                    if (mask_kind != 0) cpu_.dropout(mask, a.view());  // as forward left them
                    const Dense<float> d0 =
                        testing::random_dense<float>(rows, cols, 4, seed + 1, -1, 1, kPad);
                    DeviceArray<uint32_t> rows_d = dev_array(dev(), batch.rows, "mask rows");
                    DropoutMask dmask = mask;
                    dmask.rows.rows = batch.rows.empty() ? nullptr : rows_d.data();
                    DevMat ad(dev(), a), dd(dev(), d0);
                    dev().activation_backward(act, ad.cview(), mask_kind ? &dmask : nullptr,
                                              dd.view());
                    Dense<float> want = d0;
                    cpu_.activation_backward(act, a.cview(), mask_kind ? &mask : nullptr,
                                             want.view());
                    ASSERT_TRUE(close_dense(want, dd.get(d0), 1e-5, 0.05))
                        << to_string(kind) << " cols=" << cols << " mask=" << mask_kind
                        << (permuted ? " permuted" : "");
                }
    }
}

TEST_F(CudaParity, DropoutInvertedAndAlpha) {
    int cases = 0;
    for (size_t cols : {1, 33, 130, 2049})
        for (float p : {0.0f, 0.25f, 0.9f})
            for (bool alpha : {false, true})
                for (bool permuted : {false, true}) {
                    const uint64_t seed = uint64_t(++cases) * 101;
                    const size_t rows = 29;
                    const Dense<float> m0 =
                        testing::random_dense<float>(rows, cols, 2, seed, -2, 2, kPad);
                    const TestBatch batch = testing::make_batch(rows + 5, rows, permuted, seed);
                    DropoutMask mask;
                    mask.rows = batch.view();
                    mask.col_offset = permuted ? 11 : 0;
                    mask.params = alpha ? formulas::alpha_dropout(p, seed, -1.7580993f)
                                        : formulas::inverted_dropout(p, seed);
                    DeviceArray<uint32_t> rows_d = dev_array(dev(), batch.rows, "mask rows");
                    DropoutMask dmask = mask;
                    dmask.rows.rows = batch.rows.empty() ? nullptr : rows_d.data();
                    DevMat md(dev(), m0);
                    dev().dropout(dmask, md.view());
                    Dense<float> want = m0;
                    cpu_.dropout(mask, want.view());
                    const Dense<float> got = md.get(m0);
                    ASSERT_TRUE(close_dense(want, got, 1e-6, 0.0, 1e-6))
                        << "cols=" << cols << " p=" << p << (alpha ? " alpha" : " inverted");
                    // The mask itself is exact: a unit is dropped on both or on neither.
                    for (size_t r = 0; r < rows; ++r)
                        for (size_t c = 0; c < cols; ++c)
                            if (want.at(r, c) == mask.params.dropped && p > 0.0f) {
                                ASSERT_EQ(got.at(r, c), mask.params.dropped) << r << "," << c;
                            }
                }
}

// ---- reductions ----

TEST_F(CudaParity, ColumnSum) {
    int cases = 0;
    for (size_t rows : {0, 1, 7, 64, 1000, 5000})
        for (size_t cols : {1, 5, 130, 1000})
            for (float alpha : {1.0f, 0.5f})
                for (float beta : {0.0f, 1.0f, -0.3f}) {
                    const uint64_t seed = uint64_t(++cases) * 7;
                    const Dense<float> m = testing::random_dense<float>(rows, cols, 3, seed);
                    std::vector<float> out0(cols);
                    std::mt19937_64 rng(seed);
                    for (float& v : out0) v = beta == 0.0f ? kNaN : float(rng() % 100) / 50.0f;
                    DevMat md(dev(), m);
                    DeviceArray<float> od = dev_array(dev(), out0, "column sums");
                    dev().column_sum(md.cview(), alpha, beta, od.data());
                    std::vector<float> want = out0;
                    cpu_.column_sum(m.cview(), alpha, beta, want.data());
                    const std::vector<float> got = fetch(od, cols);
                    // Relative to the sum of |terms|.
                    for (size_t c = 0; c < cols; ++c) {
                        double mag = beta == 0.0f ? 0.0 : std::fabs(beta * out0[c]);
                        for (size_t r = 0; r < rows; ++r) mag += std::fabs(alpha * m.at(r, c));
                        ASSERT_LE(std::fabs(got[c] - want[c]), 1e-5 * mag + 1e-7)
                            << rows << "x" << cols << " col " << c << " cpu " << want[c]
                            << " device " << got[c];
                    }
                }
}

TEST_F(CudaParity, SparsenessPenalty) {
    int cases = 0;
    for (size_t rows : {1, 7, 64, 700})
        for (size_t cols : {1, 33, 300})
            for (float p : {0.05f, 0.3f})
                for (bool relu_like : {false, true})
                    for (bool with_delta : {false, true}) {
                        const uint64_t seed = uint64_t(++cases) * 17;
                        // Sigmoid outputs, or values whose column means leave (0, 1) (clamped).
                        const Dense<float> a =
                            relu_like
                                ? testing::random_dense<float>(rows, cols, 2, seed, 0, 2.5)
                                : testing::random_dense<float>(rows, cols, 2, seed, 0.01, 0.99);
                        const Dense<float> d0 =
                            testing::random_dense<float>(rows, cols, 3, seed + 1, -1, 1, kPad);
                        const float beta = 0.7f, scale = 1.0f / float(rows);
                        DevMat ad(dev(), a), dd(dev(), d0);
                        DeviceArray<double> ld(dev(), 1, "loss");
                        const double start = 0.25;
                        ld.upload(&start, 1);
                        dev().sparseness_penalty(p, beta, ad.cview(), scale,
                                                 with_delta ? dd.view() : MatrixView{}, ld.data());
                        Dense<float> want = d0;
                        double loss = start;
                        cpu_.sparseness_penalty(p, beta, a.cview(), scale,
                                                with_delta ? want.view() : MatrixView{}, &loss);
                        const double got_loss = fetch(ld, 1)[0];
                        ASSERT_TRUE(close_scalar(loss, got_loss, 1e-5, 1e-9))
                            << "loss cpu " << loss << " device " << got_loss;
                        ASSERT_TRUE(close_dense(want, dd.get(d0), 1e-5, 0.05))
                            << rows << "x" << cols << " p=" << p;
                    }
}

TEST_F(CudaParity, NormalizeRowsAndColumns) {
    int cases = 0;
    for (size_t rows : {1, 7, 64, 1000})
        for (size_t cols : {1, 33, 130, 1000})
            for (bool by_columns : {false, true}) {
                const uint64_t seed = uint64_t(++cases) * 23;
                Dense<float> m = testing::random_dense<float>(rows, cols, 2, seed, -1, 1, kPad);
                // Some rows / columns far longer than the bound, the others shorter.
                std::mt19937_64 rng(seed);
                if (by_columns) {
                    for (size_t c = 0; c < cols; ++c)
                        if (rng() % 3 == 0)
                            for (size_t r = 0; r < rows; ++r) m.at(r, c) *= 10.0f;
                } else {
                    for (size_t r = 0; r < rows; ++r)
                        if (rng() % 3 == 0)
                            for (size_t c = 0; c < cols; ++c) m.at(r, c) *= 10.0f;
                }
                const float max_norm =
                    float(std::sqrt(double(by_columns ? rows : cols) / 3.0) * 1.5);
                DevMat md(dev(), m);
                Dense<float> want = m;
                if (by_columns) {
                    dev().normalize_columns(max_norm, md.view());
                    cpu_.normalize_columns(max_norm, want.view());
                } else {
                    dev().normalize_rows(max_norm, md.view());
                    cpu_.normalize_rows(max_norm, want.view());
                }
                const Dense<float> got = md.get(m);
                ASSERT_TRUE(close_dense(want, got, 1e-6, 0.0, 1e-7))
                    << rows << "x" << cols << (by_columns ? " columns" : " rows");
                // What the CPU left alone, the device left alone too, bit for bit.
                for (size_t r = 0; r < rows; ++r)
                    for (size_t c = 0; c < cols; ++c)
                        if (bits(want.at(r, c)) == bits(m.at(r, c))) {
                            ASSERT_EQ(bits(got.at(r, c)), bits(m.at(r, c))) << r << "," << c;
                        }
            }
}

// ---- row statistics of a column-split layer (model parallelism) ----

// Per row: row_max (exact: NaNs ignored, -inf for empty rows), exp_rows with the CPU's max
// (element-wise 1e-5, sums relative 1e-5), divide_rows (IEEE division: bit for bit; NaN as NaN),
// row_sum_squares (relative 1e-6), clip_rows with the CPU's squared norms (the factor is
// computed in double on both: 1e-6, and rows within the bound untouched bit for bit); then the
// SoftMax composed of them on the device against the CPU's SoftMax (1e-5, as the SoftMax).
TEST_F(CudaParity, RowStatisticsOps) {
    struct Shape {
        size_t rows, cols;
    };
    formulas::ActivationParams softmax;
    softmax.kind = Activation::kSoftMax;
    int cases = 0;
    for (const Shape s : {Shape{1, 1}, Shape{3, 0}, Shape{7, 5}, Shape{64, 130}, Shape{3, 1000},
                          Shape{33, 4099}, Shape{5, 5000}}) {
        const uint64_t seed = uint64_t(++cases) * 31;
        const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.cols);
        Dense<float> m = testing::random_dense<float>(s.rows, s.cols, 3, seed, -4, 4, kPad);
        std::mt19937_64 rng(seed);
        for (size_t r = 0; r < s.rows; ++r) {  // spread rows, long rows, NaN and inf entries
            const uint64_t kind = rng() % 5;
            for (size_t c = 0; c < s.cols; ++c) {
                if (kind == 1) m.at(r, c) *= 20.0f;
                if (kind == 2 && r > 0) m.at(r, c) *= 10.0f;
            }
            if (kind == 3 && s.cols > 2) m.at(r, rng() % s.cols) = kNaN;
            if (kind == 4 && s.cols > 2) m.at(r, rng() % s.cols) = -kInf;
        }
        DevMat md(dev(), m);
        DeviceArray<float> out_d(dev(), s.rows + 1, "row stats");

        // row_max
        std::vector<float> want_max(s.rows);
        cpu_.row_max(m.cview(), want_max.data());
        dev().row_max(md.cview(), out_d.data());
        const std::vector<float> got_max = fetch(out_d, s.rows);
        for (size_t r = 0; r < s.rows; ++r)
            ASSERT_EQ(got_max[r], want_max[r]) << what << " row_max " << r;  // +0 == -0

        // row_sum_squares (of the rows without NaN; NaN rows give NaN on both)
        std::vector<float> want_sq(s.rows);
        cpu_.row_sum_squares(m.cview(), want_sq.data());
        dev().row_sum_squares(md.cview(), out_d.data());
        const std::vector<float> got_sq = fetch(out_d, s.rows);
        for (size_t r = 0; r < s.rows; ++r) {
            if (std::isnan(want_sq[r]) || std::isinf(want_sq[r])) {  // NaN payloads may differ
                ASSERT_TRUE(std::isnan(got_sq[r]) == std::isnan(want_sq[r]) &&
                            (std::isnan(got_sq[r]) || got_sq[r] == want_sq[r]))
                    << what << " row_sum_squares " << r << " cpu " << want_sq[r] << " device "
                    << got_sq[r];
                continue;
            }
            ASSERT_TRUE(close_scalar(want_sq[r], got_sq[r], 1e-6, 0.0))
                << what << " row_sum_squares " << r << " cpu " << want_sq[r] << " device "
                << got_sq[r];
        }

        // exp_rows with the CPU's maxima, then divide_rows by the CPU's sums
        DeviceArray<float> shift_d = dev_array(dev(), want_max, "shift");
        Dense<float> want_e = m;
        std::vector<float> want_sum(s.rows);
        cpu_.exp_rows(want_max.data(), want_e.view(), want_sum.data());
        dev().exp_rows(shift_d.data(), md.view(), out_d.data());
        const Dense<float> got_e = md.get(m);
        ASSERT_TRUE(close_dense(want_e, got_e, 1e-5, 0.0, 1e-37)) << what << " exp_rows";
        const std::vector<float> got_sum = fetch(out_d, s.rows);
        for (size_t r = 0; r < s.rows; ++r) {
            if (std::isnan(want_sum[r])) {
                ASSERT_TRUE(std::isnan(got_sum[r])) << what << " exp_rows sum " << r;
                continue;
            }
            ASSERT_TRUE(close_scalar(want_sum[r], got_sum[r], 1e-5, 0.0))
                << what << " exp_rows sum " << r << " cpu " << want_sum[r] << " device "
                << got_sum[r];
        }
        DevMat ed(dev(), want_e);  // the CPU's exp values: divide_rows compared bit for bit
        DeviceArray<float> sum_d = dev_array(dev(), want_sum, "sums");
        Dense<float> want_q = want_e;
        cpu_.divide_rows(want_sum.data(), want_q.view());
        dev().divide_rows(sum_d.data(), ed.view());
        const Dense<float> got_q = ed.get(want_e);
        for (size_t i = 0; i < want_q.data.size(); ++i) {
            if (std::isnan(want_q.data[i])) {  // NaN: any NaN (the device's payload differs)
                ASSERT_TRUE(std::isnan(got_q.data[i])) << what << " divide_rows " << i;
                continue;
            }
            ASSERT_EQ(bits(got_q.data[i]), bits(want_q.data[i])) << what << " divide_rows " << i;
        }

        // clip_rows with the CPU's squared norms
        const float max_norm = float(std::sqrt(double(s.cols) / 3.0) * 1.5 * 4.0);
        DeviceArray<float> sq_d = dev_array(dev(), want_sq, "squared norms");
        DevMat cd(dev(), m);
        Dense<float> want_c = m;
        cpu_.clip_rows(max_norm, want_sq.data(), want_c.view());
        dev().clip_rows(max_norm, sq_d.data(), cd.view());
        const Dense<float> got_c = cd.get(m);
        ASSERT_TRUE(close_dense(want_c, got_c, 1e-6, 0.0, 0.0)) << what << " clip_rows";
        for (size_t r = 0; r < s.rows; ++r)
            for (size_t c = 0; c < s.cols; ++c)
                if (bits(want_c.at(r, c)) == bits(m.at(r, c))) {
                    ASSERT_EQ(bits(got_c.at(r, c)), bits(m.at(r, c))) << what << " clip_rows";
                }

        // The SoftMax composed on the device (rows without NaN/inf) vs the CPU's SoftMax.
        Dense<float> z = testing::random_dense<float>(s.rows, s.cols, 3, seed + 1, -30, 30, kPad);
        DevMat zd(dev(), z);
        dev().row_max(zd.cview(), out_d.data());
        DeviceArray<float> row_sum_d(dev(), s.rows + 1, "row sums");
        dev().exp_rows(out_d.data(), zd.view(), row_sum_d.data());
        dev().divide_rows(row_sum_d.data(), zd.view());
        Dense<float> want_z = z;
        cpu_.bias_activation_forward(softmax, nullptr, want_z.view());
        ASSERT_TRUE(close_dense(want_z, zd.get(z), 1e-5, 0.05)) << what << " composed SoftMax";
    }
}

// output_delta (SoftMax, multinomial CrossEntropy) on a column band of the targets with
// row_totals set, as element-wise output_delta (1e-5).
TEST_F(CudaParity, OutputDeltaWithRowTotalsOnAColumnBand) {
    formulas::ActivationParams act;
    act.kind = Activation::kSoftMax;
    formulas::LossParams loss;
    loss.kind = ErrorFunction::kCrossEntropy;
    loss.multinomial = true;
    int cases = 0;
    for (uint32_t n : {9u, 1000u})
        for (RowShape shape : testing::kAllShapes)
            for (bool valued : {false, true}) {
                const uint64_t seed = uint64_t(++cases) * 37;
                const size_t rows = 17;
                const Dataset t = testing::random_dataset(rows + 5, n, shape, valued, seed);
                const TestBatch batch = testing::make_batch(t.rows, rows, true, seed + 1);
                // The band [c0, n) renumbered from 0, and the whole rows' target sums.
                const uint32_t c0 = n / 3;
                Dataset tb;
                tb.rows = t.rows;
                tb.cols = n - c0;
                std::vector<float> totals(t.rows);
                for (uint64_t r = 0; r < t.rows; ++r) {
                    double sum = 0;
                    for (uint64_t e = t.offsets[r]; e < t.offsets[r + 1]; ++e) {
                        sum += testing::entry_value(t, e);
                        if (t.indices[e] < c0) continue;
                        tb.indices.push_back(t.indices[e] - c0);
                        if (valued) tb.values.push_back(t.values[e]);
                    }
                    tb.offsets.push_back(tb.indices.size());
                    totals[r] = float(sum);
                }
                Dense<float> a = testing::random_dense<float>(rows, n, 2, seed + 2, -3, 3, kPad);
                cpu_.bias_activation_forward(act, nullptr, a.view());
                const Dense<float> ab_host = [&] {  // the band of a, padded
                    Dense<float> b(rows, n - c0, 2, kPad);
                    for (size_t r = 0; r < rows; ++r)
                        for (size_t c = c0; c < n; ++c) b.at(r, c - c0) = a.at(r, c);
                    return b;
                }();
                const Dense<float> d0 =
                    testing::random_dense<float>(rows, n - c0, 3, seed + 3, -1, 1, kPad);
                DevCsr target(dev(), tb, batch, c0);
                DeviceArray<float> totals_d = dev_array(dev(), totals, "row totals");
                target.view.row_totals = totals_d.data();
                target.host.row_totals = totals.data();
                DevMat ad(dev(), ab_host), dd(dev(), d0);
                DeviceArray<double> ld(dev(), 1, "loss");
                const double start = 0.5;
                ld.upload(&start, 1);
                dev().output_delta(loss, act, ad.cview(), target.view, 0.25f, dd.view(), ld.data());
                Dense<float> want = d0;
                double loss_cpu = start;
                cpu_.output_delta(loss, act, ab_host.cview(), target.host, 0.25f, want.view(),
                                  &loss_cpu);
                const std::string what = "n=" + std::to_string(n) + " " +
                                         testing::shape_name(shape) + (valued ? " valued" : "");
                ASSERT_TRUE(close_dense(want, dd.get(d0), 1e-5, 0.05)) << what;
                const double got = fetch(ld, 1)[0];
                ASSERT_TRUE(close_scalar(loss_cpu, got, 1e-5, 1e-6))
                    << what << " loss cpu " << loss_cpu << " device " << got;
            }
}

// ---- add_matrix, scatter_rows ----

TEST_F(CudaParity, AddMatrix) {
    int cases = 0;
    for (size_t rows : {1, 7, 300})
        for (size_t cols : {1, 33, 130})
            for (auto ab : {std::pair<float, float>{1, 1}, {0.5f, 0}, {-2, 0.3f}}) {
                const uint64_t seed = uint64_t(++cases) * 5;
                const Dense<float> x = testing::random_dense<float>(rows, cols, 1, seed);
                Dense<float> y = testing::random_dense<float>(rows, cols, 3, seed + 1, -1, 1, kPad);
                if (ab.second == 0.0f)
                    for (size_t r = 0; r < rows; ++r)
                        for (size_t c = 0; c < cols; ++c) y.at(r, c) = kNaN;
                DevMat xd(dev(), x), yd(dev(), y);
                dev().add_matrix(ab.first, xd.cview(), ab.second, yd.view());
                Dense<float> want = y;
                cpu_.add_matrix(ab.first, x.cview(), ab.second, want.view());
                ASSERT_TRUE(close_dense(want, yd.get(y), 1e-5, 0.05))
                    << rows << "x" << cols << " alpha=" << ab.first << " beta=" << ab.second;
            }
}

TEST_F(CudaParity, ScatterRows) {
    int cases = 0;
    for (size_t cols : {1, 33, 130})
        for (size_t count : {0, 1, 17, 50})
            for (float beta : {0.0f, 1.0f, 0.5f}) {
                const uint64_t seed = uint64_t(++cases) * 41;
                const size_t rows = 50, capacity = count + 3;
                std::vector<uint32_t> all(rows);
                std::iota(all.begin(), all.end(), 0u);
                std::mt19937_64 rng(seed);
                std::shuffle(all.begin(), all.end(), rng);
                std::vector<uint32_t> ids(all.begin(), all.begin() + count);
                std::sort(ids.begin(), ids.end());
                ids.resize(capacity, 0u);
                const Dense<float> vals = testing::random_dense<float>(capacity, cols, 0, seed + 1);
                Dense<float> dense =
                    testing::random_dense<float>(rows, cols, 2, seed + 2, -1, 1, kPad);
                if (beta == 0.0f)
                    for (size_t r = 0; r < rows; ++r)
                        for (size_t c = 0; c < cols; ++c) dense.at(r, c) = kNaN;
                std::vector<uint32_t> count_h{uint32_t(count)};
                std::vector<float> values_h(vals.data.begin(), vals.data.begin() + capacity * cols);
                SparseRowGrad gc{ids.data(), count_h.data(), values_h.data(), capacity, cols};
                DeviceArray<uint32_t> ids_d = dev_array(dev(), ids, "ids");
                DeviceArray<uint32_t> count_d = dev_array(dev(), count_h, "count");
                DeviceArray<float> values_d = dev_array(dev(), values_h, "values");
                SparseRowGrad gd{ids_d.data(), count_d.data(), values_d.data(), capacity, cols};
                DevMat dd(dev(), dense);
                dev().scatter_rows(gd, beta, dd.view());
                Dense<float> want = dense;
                cpu_.scatter_rows(gc, beta, want.view());
                ASSERT_TRUE(close_dense(want, dd.get(dense), 1e-5, 0.05))
                    << "cols=" << cols << " count=" << count << " beta=" << beta;
            }
}

// ---- output_delta ----

struct DeltaCombo {
    Activation act;
    ErrorFunction loss;
    bool multinomial;
};

std::vector<DeltaCombo> delta_combos() {
    std::vector<DeltaCombo> v;
    for (int a = 0; a < kActivations; ++a)
        for (int l = 0; l < kLosses; ++l) v.push_back({Activation(a), ErrorFunction(l), false});
    v.push_back({Activation::kSoftMax, ErrorFunction::kCrossEntropy, true});
    return v;
}

TEST_F(CudaParity, OutputDeltaEveryLossAndActivation) {
    int cases = 0;
    for (const DeltaCombo& combo : delta_combos())
        for (size_t n : {5, 130, 1000})
            for (bool ignore_zero : {false, true})
                for (bool weighted : {false, true})
                    for (bool boosted : {false, true}) {
                        if (boosted && combo.act == Activation::kSoftMax) continue;
                        const uint64_t seed = uint64_t(++cases) * 29;
                        const RowShape shape = testing::kAllShapes[cases % 4];
                        const bool valued = (cases / 4) % 2 == 1;
                        const size_t rows = n == 1000 ? 17 : 64;
                        const formulas::ActivationParams act = act_params(combo.act);
                        formulas::LossParams loss;
                        loss.kind = combo.loss;
                        loss.multinomial = combo.multinomial;
                        loss.ignore_zero = ignore_zero;
                        if (boosted) {
                            loss.boost_one = 1.5f;
                            loss.boost_zero = 0.5f;
                        }
                        Dense<float> a =
                            testing::random_dense<float>(rows, n, 2, seed, -3, 3, kPad);
                        cpu_.bias_activation_forward(act, nullptr, a.view());
                        const Dataset t =
                            testing::random_dataset(rows + 6, uint32_t(n), shape, valued, seed + 1);
                        const TestBatch batch = testing::make_batch(t.rows, rows, true, seed + 2);
                        std::vector<float> wts(t.rows);
                        std::mt19937_64 rng(seed);
                        for (float& w : wts) w = 0.5f + float(rng() % 100) / 40.0f;
                        const Dense<float> d0 =
                            testing::random_dense<float>(rows, n, 3, seed + 3, -1, 1, kPad);
                        const float scale = 1.0f / float(rows);

                        DevCsr target(dev(), t, batch, 0, weighted ? &wts : nullptr);
                        DevMat ad(dev(), a), dd(dev(), d0);
                        DeviceArray<double> ld(dev(), 1, "loss");
                        const double start = 1.5;
                        ld.upload(&start, 1);
                        dev().output_delta(loss, act, ad.cview(), target.view, scale, dd.view(),
                                           ld.data());
                        Dense<float> want = d0;
                        double loss_cpu = start;
                        cpu_.output_delta(loss, act, a.cview(), target.host, scale, want.view(),
                                          &loss_cpu);
                        const std::string what =
                            std::string(to_string(combo.act)) + "/" + to_string(combo.loss) +
                            (combo.multinomial ? " multinomial" : "") + " n=" + std::to_string(n) +
                            (ignore_zero ? " ignore-zero" : "") + (weighted ? " weighted" : "") +
                            (boosted ? " boosted" : "") + " " + testing::shape_name(shape);
                        ASSERT_TRUE(close_dense(want, dd.get(d0), 1e-5, 0.05)) << what;
                        const double got = fetch(ld, 1)[0];
                        ASSERT_TRUE(close_scalar(loss_cpu, got, 1e-5, 1e-6))
                            << what << " loss cpu " << loss_cpu << " device " << got;
                        // No loss requested: the delta alone, and nothing else is written.
                        DevMat dd2(dev(), d0);
                        dev().output_delta(loss, act, ad.cview(), target.view, scale, dd2.view(),
                                           nullptr);
                        ASSERT_TRUE(close_dense(want, dd2.get(d0), 1e-5, 0.05)) << what;
                    }
}

TEST_F(CudaParity, OutputDeltaLossIsDeterministic) {
    const size_t rows = 512, n = 3000;
    const formulas::ActivationParams act = act_params(Activation::kSigmoid);
    formulas::LossParams loss;
    loss.kind = ErrorFunction::kCrossEntropy;
    Dense<float> a = testing::random_dense<float>(rows, n, 0, 5, -3, 3);
    cpu_.bias_activation_forward(act, nullptr, a.view());
    const Dataset t = testing::random_dataset(rows, uint32_t(n), RowShape::kPowerLaw, false, 6);
    const TestBatch batch = testing::make_batch(t.rows, rows, true, 7);
    DevCsr target(dev(), t, batch);
    DevMat ad(dev(), a), dd(dev(), a);
    DeviceArray<double> ld(dev(), 1, "loss");
    double first = 0;
    for (int run = 0; run < 3; ++run) {
        const double zero = 0;
        ld.upload(&zero, 1);
        dev().output_delta(loss, act, ad.cview(), target.view, 0.5f, dd.view(), ld.data());
        const double got = fetch(ld, 1)[0];
        if (run == 0) first = got;
        ASSERT_EQ(std::memcmp(&first, &got, sizeof(double)), 0) << "run " << run;
    }
}

// ---- optimizers ----

formulas::OptimizerStep make_step(OptimizerKind kind, bool regularised, int t) {
    formulas::OptimizerStep s;
    s.kind = kind;
    s.learning_rate = 0.01f / (1.0f + 0.1f * float(t - 1));
    s.mu = 0.9f;
    s.mu1 = 0.999f;
    s.epsilon = (kind == OptimizerKind::kAdam || kind == OptimizerKind::kAdamW) ? 1e-8f : 1e-9f;
    s.l2 = regularised ? 1e-3f : 0.0f;
    s.l1 = regularised ? 1e-4f : 0.0f;
    s.bias_correction1 = float(1.0 / (1.0 - std::pow(0.9, t)));
    s.bias_correction2 = float(1.0 / (1.0 - std::pow(0.999, t)));
    return s;
}

TEST_F(CudaParity, OptimizerStepEveryKind) {
    struct Shape {
        size_t rows, cols;
    };
    int cases = 0;
    for (int k = 0; k < kOptimizers; ++k)
        for (bool reg : {false, true})
            for (const Shape s : {Shape{1, 1}, Shape{7, 130}, Shape{300, 33}}) {
                const OptimizerKind kind = OptimizerKind(k);
                const uint64_t seed = uint64_t(++cases) * 37;
                Dense<float> w = testing::random_dense<float>(s.rows, s.cols, 2, seed, -1, 1, kPad);
                Dense<float> s1(s.rows, s.cols, 2, kPad), s2(s.rows, s.cols, 2, kPad);
                for (size_t r = 0; r < s.rows; ++r)
                    for (size_t c = 0; c < s.cols; ++c) s1.at(r, c) = s2.at(r, c) = 0.0f;
                DevMat wd(dev(), w), s1d(dev(), s1), s2d(dev(), s2);
                const int slots = formulas::optimizer_state_slots(kind);
                for (int t = 1; t <= 3; ++t) {
                    const Dense<float> g =
                        testing::random_dense<float>(s.rows, s.cols, 1, seed + t, -0.5, 0.5);
                    DevMat gd(dev(), g);
                    const formulas::OptimizerStep step = make_step(kind, reg, t);
                    dev().optimizer_step(step, wd.view(), gd.cview(),
                                         slots >= 1 ? s1d.buf.data() : nullptr,
                                         slots >= 2 ? s2d.buf.data() : nullptr);
                    cpu_.optimizer_step(step, w.view(), g.cview(),
                                        slots >= 1 ? s1.data.data() : nullptr,
                                        slots >= 2 ? s2.data.data() : nullptr);
                }
                const std::string what = std::string(to_string(kind)) + (reg ? " l1/l2" : "") +
                                         " " + std::to_string(s.rows) + "x" +
                                         std::to_string(s.cols);
                ASSERT_TRUE(close_dense(w, wd.get(w), 1e-5, 0.05)) << what << " weights";
                ASSERT_TRUE(close_dense(s1, s1d.get(s1), 1e-5, 0.05)) << what << " state 1";
                ASSERT_TRUE(close_dense(s2, s2d.get(s2), 1e-5, 0.05)) << what << " state 2";
            }
}

TEST_F(CudaParity, OptimizerStepRowsExactAndLazy) {
    int cases = 0;
    for (int k = 0; k < kOptimizers; ++k)
        for (bool reg : {false, true})
            for (SparseUpdate mode : {SparseUpdate::kExact, SparseUpdate::kLazy})
                for (size_t cols : {1, 33, 130}) {
                    const OptimizerKind kind = OptimizerKind(k);
                    const uint64_t seed = uint64_t(++cases) * 43;
                    const size_t rows = 60;
                    Dense<float> w = testing::random_dense<float>(rows, cols, 2, seed, -1, 1, kPad);
                    Dense<float> s1(rows, cols, 2, kPad), s2(rows, cols, 2, kPad);
                    for (size_t r = 0; r < rows; ++r)
                        for (size_t c = 0; c < cols; ++c) s1.at(r, c) = s2.at(r, c) = 0.0f;
                    DevMat wd(dev(), w), s1d(dev(), s1), s2d(dev(), s2);
                    const int slots = formulas::optimizer_state_slots(kind);
                    std::mt19937_64 rng(seed);
                    for (int t = 1; t <= 3; ++t) {
                        std::vector<uint32_t> all(rows);
                        std::iota(all.begin(), all.end(), 0u);
                        std::shuffle(all.begin(), all.end(), rng);
                        const size_t count = t == 2 ? 0 : 5 + rng() % 20;
                        const size_t capacity = count + 2;
                        std::vector<uint32_t> ids(all.begin(), all.begin() + count);
                        std::sort(ids.begin(), ids.end());
                        ids.resize(capacity, 0u);
                        std::vector<uint32_t> count_h{uint32_t(count)};
                        const Dense<float> g =
                            testing::random_dense<float>(capacity, cols, 0, seed + t, -0.5, 0.5);
                        std::vector<float> values(g.data.begin(), g.data.begin() + capacity * cols);
                        SparseRowGrad gc{ids.data(), count_h.data(), values.data(), capacity, cols};
                        DeviceArray<uint32_t> ids_d = dev_array(dev(), ids, "ids");
                        DeviceArray<uint32_t> count_d = dev_array(dev(), count_h, "count");
                        DeviceArray<float> values_d = dev_array(dev(), values, "values");
                        SparseRowGrad gd{ids_d.data(), count_d.data(), values_d.data(), capacity,
                                         cols};
                        const formulas::OptimizerStep step = make_step(kind, reg, t);
                        dev().optimizer_step_rows(step, wd.view(), gd,
                                                  slots >= 1 ? s1d.buf.data() : nullptr,
                                                  slots >= 2 ? s2d.buf.data() : nullptr, mode);
                        cpu_.optimizer_step_rows(step, w.view(), gc,
                                                 slots >= 1 ? s1.data.data() : nullptr,
                                                 slots >= 2 ? s2.data.data() : nullptr, mode);
                    }
                    const std::string what = std::string(to_string(kind)) + (reg ? " l1/l2" : "") +
                                             (mode == SparseUpdate::kExact ? " exact" : " lazy") +
                                             " cols=" + std::to_string(cols);
                    const Dense<float> got = wd.get(w);
                    ASSERT_TRUE(close_dense(w, got, 1e-5, 0.05)) << what << " weights";
                    ASSERT_TRUE(close_dense(s1, s1d.get(s1), 1e-5, 0.05)) << what << " state 1";
                    ASSERT_TRUE(close_dense(s2, s2d.get(s2), 1e-5, 0.05)) << what << " state 2";
                }
}

// ---- top_k ----

// Scores with many ties, -inf, NaN, and both signed zeros; or continuous ones.
Dense<float> topk_scores(size_t rows, size_t cols, bool tied, uint64_t seed) {
    Dense<float> s(rows, cols, 3, 1e9f);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) {
            if (!tied) {
                s.at(r, c) = float(u(rng));
                continue;
            }
            const uint64_t v = rng() % 100;
            s.at(r, c) = v == 0   ? -kInf
                         : v == 1 ? kNaN
                         : v == 2 ? -0.0f
                         : v == 3 ? 0.0f
                         : v == 4 ? kInf
                                  : float(int(v % 7) - 3) * 0.5f;
        }
    return s;
}

TEST_F(CudaParity, TopKExactlyMatchesTheCpu) {
    int cases = 0;
    for (size_t n : {1, 5, 33, 1000, 4099})
        for (size_t rows : {1, 7, 64})
            for (bool tied : {true, false})
                for (int exclusion : {0, 1, 2})  // none, uniform rows, power-law rows
                    for (size_t k : {size_t(1), size_t(3), size_t(10), size_t(64), size_t(100),
                                     size_t(1000), n, n + 5}) {
                        const uint64_t seed = uint64_t(++cases) * 53;
                        const Dense<float> s = topk_scores(rows, n, tied, seed);
                        const Dataset ex = testing::random_dataset(
                            rows + 3, uint32_t(n),
                            exclusion == 2 ? RowShape::kPowerLaw : RowShape::kUniform, false,
                            seed + 1);
                        const TestBatch batch = testing::make_batch(ex.rows, rows, true, seed + 2);
                        std::vector<float> want_s(rows * k, 123.0f), got_s(rows * k, 7.0f);
                        std::vector<uint32_t> want_i(rows * k, 7u), got_i(rows * k, 9u);
                        CsrBatchView ex_host = testing::csr_view(ex, batch);
                        cpu_.top_k(s.cview(), exclusion ? &ex_host : nullptr, k, want_s.data(),
                                   want_i.data());
                        DevMat sd(dev(), s);
                        DevCsr exd(dev(), ex, batch);
                        DeviceArray<float> os(dev(), rows * k, "top scores");
                        DeviceArray<uint32_t> oi(dev(), rows * k, "top indices");
                        dev().top_k(sd.cview(), exclusion ? &exd.view : nullptr, k, os.data(),
                                    oi.data());
                        got_s = fetch(os, rows * k);
                        got_i = fetch(oi, rows * k);
                        for (size_t i = 0; i < rows * k; ++i) {
                            ASSERT_EQ(got_i[i], want_i[i])
                                << "n=" << n << " rows=" << rows << " k=" << k
                                << (tied ? " tied" : "") << " exclusion=" << exclusion << " slot "
                                << i;
                            ASSERT_EQ(bits(got_s[i]), bits(want_s[i])) << "slot " << i;
                        }
                    }
}

// ---- full training on both devices ----

// SoftMax + multinomial CrossEntropy, a sparseness penalty, WeightNorm, DeltaNorm, SELU with
// alpha dropout.
const char* kSoftmaxNet = R"({
  "Version": 0.9, "Name": "sm", "Kind": "AutoEncoder",
  "Denoising": {"p": 0.3},
  "ErrorFunction": "CrossEntropy",
  "SparsenessPenalty": {"p": 0.1, "beta": 0.5},
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 40, "Activation": "Sigmoid", "Sparse": true,
     "WeightNorm": 3.0, "DeltaNorm": 1.0},
    {"Name": "Hidden2", "Kind": "Hidden", "N": 24, "Activation": "ScaledExponentialLinear",
     "pDropout": 0.2},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "SoftMax"}
  ]})";

struct TrainResult {
    std::vector<double> losses;
    std::vector<std::vector<float>> parameters;
    TopK top;
    std::vector<float> scores;  // [rows, items] of the trained network
};

TrainResult train_on(const std::string& device, const char* config_json, const Dataset& data,
                     OptimizerOptions optimizer) {
    NetworkConfig config = NetworkConfig::from_json(config_json);
    Dataset in = data, out = data;
    in.name = "in";
    out.name = "out";
    NetworkOptions no;
    no.device = device;
    no.threads = 2;
    no.seed = 11;
    Network net = Network::create(config, {{"in", in.cols}, {"out", out.cols}}, no);
    TrainOptions to;
    to.epochs = 4;
    to.batch = 64;
    to.seed = 5;
    to.optimizer = optimizer;
    Trainer trainer(net, {{"in", &in}, {"out", &out}}, to);
    TrainResult r;
    for (const EpochStats& e : trainer.fit()) r.losses.push_back(e.loss);
    for (const Parameter& p : net.parameters()) r.parameters.push_back(net.get_parameter(p.name));
    Predictor predictor(net, {{"in", &in}});
    PredictOptions po;
    po.k = 10;
    po.batch = 100;
    r.top = predictor.top_k(po, &in);
    r.scores = predictor.scores(0, uint32_t(in.rows));
    return r;
}

void compare_training(const std::string& device, const char* config, OptimizerOptions opt) {
    GenerateOptions g;
    g.users = 300;
    g.items = 120;
    g.nnz = 5000;
    g.factors = 6;
    g.seed = 3;
    const Dataset data = generate(g).train;
    const TrainResult c = train_on("cpu", config, data, opt);
    const TrainResult d = train_on(device, config, data, opt);
    ASSERT_EQ(c.losses.size(), d.losses.size());
    for (size_t e = 0; e < c.losses.size(); ++e)
        EXPECT_TRUE(close_scalar(c.losses[e], d.losses[e], e == 0 ? 1e-4 : 2e-3))
            << "epoch " << e + 1 << " loss cpu " << c.losses[e] << " device " << d.losses[e];
    ASSERT_EQ(c.parameters.size(), d.parameters.size());
    for (size_t p = 0; p < c.parameters.size(); ++p) {
        double mx = 0, diff = 0;
        for (size_t i = 0; i < c.parameters[p].size(); ++i) {
            mx = std::max(mx, double(std::fabs(c.parameters[p][i])));
            diff = std::max(diff, double(std::fabs(c.parameters[p][i] - d.parameters[p][i])));
        }
        EXPECT_LE(diff, 2e-3 * mx + 1e-6) << "parameter " << p;
    }
    // Scores, then top-K: every device pick has a CPU score within twice the row's largest score
    // difference of the CPU's K-th best.
    const size_t k = c.top.k, items = data.cols;
    size_t same = 0, slots = 0;
    for (uint64_t r = 0; r < c.top.rows; ++r) {
        double top = 0, diff = 0;
        for (size_t j = 0; j < items; ++j) {
            top = std::max(top, double(std::fabs(c.scores[r * items + j])));
            diff = std::max(diff,
                            double(std::fabs(c.scores[r * items + j] - d.scores[r * items + j])));
        }
        ASSERT_LE(diff, 2e-3 * top + 1e-7) << "scores of row " << r;
        for (size_t s = 0; s < k; ++s) {
            const uint32_t gi = d.top.indices[r * k + s], ci = c.top.indices[r * k + s];
            ++slots;
            if (gi == ci) ++same;
            if (ci == UINT32_MAX) {
                EXPECT_EQ(gi, UINT32_MAX) << "row " << r;
                continue;
            }
            ASSERT_NE(gi, UINT32_MAX) << "row " << r;
            const double kth = c.top.scores[r * k + (k - 1)];
            EXPECT_GE(double(c.scores[r * items + gi]), kth - 2 * diff - 1e-7)
                << "row " << r << " slot " << s;
        }
    }
    std::printf("top-%zu: %zu of %zu slots identical\n", k, same, slots);
    EXPECT_GE(double(same), 0.9 * double(slots));
}

TEST_F(CudaParity, TrainingAutoencoderAdamMatchesTheCpu) {
    OptimizerOptions opt;
    opt.kind = OptimizerKind::kAdam;
    opt.learning_rate = 0.003f;
    compare_training(parity_device(), testing::sparse_autoencoder_json().c_str(), opt);
}

TEST_F(CudaParity, TrainingSoftmaxNesterovLazyMatchesTheCpu) {
    OptimizerOptions opt;
    opt.kind = OptimizerKind::kNesterov;
    opt.learning_rate = 0.05f;
    opt.l2 = 1e-4f;
    opt.sparse_update = SparseUpdate::kLazy;
    compare_training(parity_device(), kSoftmaxNet, opt);
}

}  // namespace
}  // namespace sparsenet
