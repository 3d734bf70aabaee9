// csr_matmul: z = beta * z + x . w for a sparse batch, with optional denoising of the inputs,
// against a dense double reference.
#include <gtest/gtest.h>

#include <cstdlib>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/precision.h"
#include "formulas/rng.h"

namespace sparsenet {
namespace {

using testing::Dense;

struct MatmulCase {
    size_t batch = 7;
    uint32_t in = 40;
    size_t out = 5;
    testing::RowShape shape = testing::RowShape::kUniform;
    bool valued = false;
    bool permuted = false;
    float p = 0.0f;
    float beta = 0.0f;
    uint32_t col_offset = 0;
    uint64_t seed = 1;
};

// Runs the op and checks it against the reference; the op's output goes to *result.
void run_and_check(Backend& backend, const MatmulCase& c, const std::string& what,
                   Dense<float>* result = nullptr) {
    const size_t pad = 3;
    const float kPad = 12345.0f;
    const Dataset d = testing::random_dataset(c.batch + 4, c.in, c.shape, c.valued, c.seed);
    const testing::TestBatch batch = testing::make_batch(d.rows, c.batch, c.permuted, c.seed + 1);
    const Dense<float> w = testing::random_dense<float>(c.in, c.out, 2, c.seed + 2);
    Dense<float> z = testing::random_dense<float>(c.batch, c.out, pad, c.seed + 3, -1, 1, kPad);
    if (c.beta == 0.0f)  // beta == 0 must overwrite, NaNs included
        for (size_t b = 0; b < c.batch; ++b)
            for (size_t o = 0; o < c.out; ++o) z.at(b, o) = std::numeric_limits<float>::quiet_NaN();
    const Dense<float> z0 = z;

    SparseNoise noise;
    noise.p = c.p;
    noise.seed = c.seed * 7919 + 11;
    backend.csr_matmul(testing::csr_view(d, batch, c.col_offset), noise, w.cview(), z.view(),
                       c.beta);

    const double s = c.p > 0 ? 1.0 / (1.0 - double(c.p)) : 1.0;
    for (size_t b = 0; b < c.batch; ++b) {
        const uint64_t ex = batch.example(b);
        for (size_t o = 0; o < c.out; ++o) {
            double ref = c.beta == 0.0f ? 0.0 : double(c.beta) * z0.at(b, o);
            double mag = std::fabs(ref);
            for (uint64_t e = d.offsets[ex]; e < d.offsets[ex + 1]; ++e) {
                const uint32_t j = d.indices[e];
                if (c.p > 0 && !formulas::keep_unit(noise.seed, ex, c.col_offset + j, c.p))
                    continue;
                const double term = testing::entry_value(d, e) * s * w.at(j, o);
                ref += term;
                mag += std::fabs(term);
            }
            ASSERT_TRUE(testing::near(z.at(b, o), ref, mag))
                << what << " b=" << b << " o=" << o << " got " << z.at(b, o) << " want " << ref;
        }
        for (size_t o = c.out; o < z.ld; ++o) ASSERT_EQ(z.at(b, o), kPad) << what << " padding";
    }
    if (result != nullptr) *result = z;
}

TEST(CsrMatmul, MatchesReferenceOverGrid) {
    CpuBackend backend(2);
    int cases = 0;
    for (size_t batch : {1, 7, 64})
        for (size_t out : {1, 5, 130})
            for (testing::RowShape shape : testing::kAllShapes)
                for (bool valued : {false, true})
                    for (bool permuted : {false, true})
                        for (float p : {0.0f, 0.3f})
                            for (float beta : {0.0f, 1.0f}) {
                                MatmulCase c;
                                c.batch = batch;
                                c.out = out;
                                c.in = 97;
                                c.shape = shape;
                                c.valued = valued;
                                c.permuted = permuted;
                                c.p = p;
                                c.beta = beta;
                                c.col_offset = p > 0 ? 1000 : 0;
                                c.seed = 100 + cases;
                                const std::string what =
                                    testing::case_name(shape, valued, batch, out, permuted) +
                                    " p=" + std::to_string(p) + " beta=" + std::to_string(beta);
                                run_and_check(backend, c, what);
                                if (HasFatalFailure()) return;
                                ++cases;
                            }
    EXPECT_EQ(cases, 576);
}

TEST(CsrMatmul, BetaOtherThanZeroOrOneScales) {
    CpuBackend backend(2);
    MatmulCase c;
    c.batch = 9;
    c.out = 33;
    c.beta = 0.5f;
    c.valued = true;
    run_and_check(backend, c, "beta=0.5");
}

// Shapes large enough to take the parallel paths (row tasks, and column blocks for a batch
// smaller than the team), checked against the reference and bit-identical for 1 and 2 threads.
TEST(CsrMatmul, ParallelPathsAreExactAndThreadCountIndependent) {
    CpuBackend one(1), two(2);
    const std::pair<size_t, size_t> shapes[] = {{256, 300}, {1, 20000}, {3, 4099}};
    for (auto [batch, out] : shapes)
        for (float p : {0.0f, 0.3f}) {
            MatmulCase c;
            c.batch = batch;
            c.out = out;
            c.in = 500;
            c.shape = testing::RowShape::kPowerLaw;
            c.valued = true;
            c.permuted = true;
            c.p = p;
            c.col_offset = 77;
            c.beta = 1.0f;
            const std::string what = "batch=" + std::to_string(batch) +
                                     " out=" + std::to_string(out) + " p=" + std::to_string(p);
            Dense<float> z1, z2;
            run_and_check(one, c, what + " threads=1", &z1);
            run_and_check(two, c, what + " threads=2", &z2);
            ASSERT_EQ(z1.data, z2.data) << what;
        }
}

// A weight matrix given only as its BF16 copy (ConstMatrixView::bf16, data null: the serving
// network's input layer, Network::keep_bf16_input_weights): bit for bit the FP32 product with the
// BF16-rounded weights, on every path (row tasks, column blocks, noise, beta), 1 or 2 threads.
TEST(CsrMatmul, Bf16WeightsGatherAsTheRoundedFp32Weights) {
    CpuBackend one(1), two(2);
    const std::pair<size_t, size_t> shapes[] = {
        {1, 5}, {7, 130}, {256, 300}, {1, 20000}, {3, 4099}};
    for (auto [batch, out] : shapes) {
        for (float p : {0.0f, 0.3f}) {
            for (float beta : {0.0f, 1.0f, 0.5f}) {
                const std::string what = "batch=" + std::to_string(batch) +
                                         " out=" + std::to_string(out) + " p=" + std::to_string(p) +
                                         " beta=" + std::to_string(beta);
                const Dataset d =
                    testing::random_dataset(batch + 4, 500, testing::RowShape::kPowerLaw, true, 5);
                const testing::TestBatch rows = testing::make_batch(d.rows, batch, true, 6);
                Dense<float> w = testing::random_dense<float>(500, out, 3, 7);
                std::vector<uint16_t> bits(w.data.size(), 0);
                for (size_t r = 0; r < w.rows; ++r) {
                    for (size_t c = 0; c < w.cols; ++c) {
                        bits[r * w.ld + c] = formulas::bf16_bits(w.at(r, c));
                        w.at(r, c) = formulas::round_bf16(w.at(r, c));
                    }
                }
                const ConstMatrixView only_bf16(nullptr, w.rows, w.cols, w.ld, false, bits.data());
                const Dense<float> z0 = testing::random_dense<float>(batch, out, 2, 8);
                const SparseNoise noise{p, 99};
                for (CpuBackend* be : {&one, &two}) {
                    Dense<float> want = z0, got = z0;
                    be->csr_matmul(testing::csr_view(d, rows, 11), noise, w.cview(), want.view(),
                                   beta);
                    be->csr_matmul(testing::csr_view(d, rows, 11), noise, only_bf16, got.view(),
                                   beta);
                    ASSERT_EQ(std::memcmp(got.data.data(), want.data.data(),
                                          want.data.size() * sizeof(float)),
                              0)
                        << what;
                }
            }
        }
    }
    // Neither FP32 nor BF16 weights: an internal error, not a crash.
    const Dataset d = testing::random_dataset(4, 10, testing::RowShape::kUniform, false, 1);
    const testing::TestBatch rows = testing::make_batch(d.rows, 2, false, 2);
    Dense<float> z(2, 3);
    EXPECT_THROW(one.csr_matmul(testing::csr_view(d, rows), SparseNoise{},
                                ConstMatrixView(nullptr, 10, 3, 3), z.view(), 0.0f),
                 Error);
}

TEST(CsrMatmul, NoiseDropsAboutPOfTheEntries) {
    // All-ones weights and one output: z[b] counts the kept entries of row b times 1/(1-p).
    const float p = 0.3f;
    const Dataset d = testing::random_dataset(400, 1000, testing::RowShape::kUniform, false, 5);
    const testing::TestBatch batch = testing::make_batch(d.rows, d.rows, false, 0);
    Dense<float> w(1000, 1, 0, 1.0f);
    Dense<float> z(400, 1);
    CpuBackend backend(2);
    backend.csr_matmul(testing::csr_view(d, batch), SparseNoise{p, 42}, w.cview(), z.view(), 0.0f);
    double kept = 0;
    for (size_t b = 0; b < 400; ++b) kept += double(z.at(b, 0)) * (1.0 - p);
    const double fraction = 1.0 - kept / double(d.nnz());
    EXPECT_NEAR(fraction, p, 0.02) << "nnz " << d.nnz();
}

TEST(CsrMatmul, DoubleInstantiationMatchesFloat) {
    const Dataset d = testing::random_dataset(20, 50, testing::RowShape::kPowerLaw, true, 9);
    const testing::TestBatch batch = testing::make_batch(d.rows, 16, true, 3);
    const Dense<float> wf = testing::random_dense<float>(50, 17, 0, 4);
    Dense<double> wd(50, 17);
    for (size_t i = 0; i < wf.data.size(); ++i) wd.data[i] = wf.data[i];
    Dense<float> zf(16, 17);
    Dense<double> zd(16, 17);
    std::vector<double> values_d;
    const SparseNoise noise{0.25f, 8};
    cpu::csr_matmul(testing::csr_view_d(d, batch, values_d, 3), noise, wd.cmat(), zd.mat(), 0.0, 2);
    CpuBackend backend(2);
    CsrBatchView xf = testing::csr_view(d, batch, 3);
    backend.csr_matmul(xf, noise, wf.cview(), zf.view(), 0.0f);
    for (size_t i = 0; i < zf.data.size(); ++i) EXPECT_NEAR(zf.data[i], zd.data[i], 1e-4);
}

TEST(CsrMatmul, RejectsMismatchedShapes) {
    CpuBackend backend(1);
    const Dataset d = testing::random_dataset(4, 10, testing::RowShape::kUniform, false, 1);
    const testing::TestBatch batch = testing::make_batch(4, 4, false, 0);
    Dense<float> w(10, 3), z(4, 4);
    try {
        backend.csr_matmul(testing::csr_view(d, batch), SparseNoise{}, w.cview(), z.view(), 0.0f);
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInternal);
    }
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

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
                                if (!sampled(uint64_t(cases) + 1)) {
                                    ++cases;
                                    continue;
                                }
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

// The slice mapping with its rows split into parts (kernels/cuda_csr_matmul.cu) and in one pass
// (SPARSENET_CSR_MATMUL_PARTS=1), and with parts that leave some empty (3, 16): each against the
// CPU, so the two paths agree within the tolerance of one.
TEST_F(CudaParity, CsrMatmulPartsAndOnePassMatchTheCpu) {
    for (const char* parts : {"1", "3", "16", ""}) {
        SCOPED_TRACE(std::string("SPARSENET_CSR_MATMUL_PARTS=") + parts);
        setenv("SPARSENET_CSR_MATMUL_PARTS", parts, 1);
        uint64_t seed = 500;
        for (size_t batch : {1, 5, 256})
            for (size_t out : {130, 600})
                for (float beta : {0.0f, 1.0f, 0.5f}) {
                    run_matmul(cpu_, dev(),
                               {batch, 3000, out, RowShape::kPowerLaw, true, batch == 5, 0.2f, beta,
                                0, ++seed});
                    if (HasFatalFailure()) break;
                }
        unsetenv("SPARSENET_CSR_MATMUL_PARTS");
        if (HasFatalFailure()) return;
    }
}

}  // namespace
}  // namespace sparsenet::parity
