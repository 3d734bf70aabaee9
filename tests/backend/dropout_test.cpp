// dropout: inverted and alpha dropout keyed by (seed, example row, global column): reference
// values, mask rate, same mask forward and backward, independence from the column split, the
// batch composition and the thread count; alpha dropout keeps SELU's mean 0 and variance 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/dropout.h"
#include "formulas/rng.h"

namespace sparsenet {
namespace {

using testing::Dense;

DropoutMask inverted(float p, uint64_t seed, const BatchRows& rows, uint32_t col_offset) {
    DropoutMask m;
    m.params = formulas::inverted_dropout(p, seed);
    m.rows = rows;
    m.col_offset = col_offset;
    return m;
}

TEST(Dropout, MatchesReferenceOverGrid) {
    CpuBackend backend(2);
    const float kPad = 3.5f;
    uint64_t seed = 1;
    for (size_t rows : {1, 7, 64})
        for (size_t cols : {1, 5, 130})
            for (bool permuted : {false, true})
                for (float p : {0.0f, 0.3f})
                    for (uint32_t col_offset : {0u, 17u}) {
                        const testing::TestBatch batch =
                            testing::make_batch(rows + 3, rows, permuted, seed);
                        Dense<float> m =
                            testing::random_dense<float>(rows, cols, 2, seed + 1, -2, 2, kPad);
                        const Dense<float> m0 = m;
                        const uint64_t mask_seed = 1000 + seed;
                        backend.dropout(inverted(p, mask_seed, batch.view(), col_offset), m.view());
                        for (size_t r = 0; r < rows; ++r) {
                            for (size_t c = 0; c < cols; ++c) {
                                const bool keep =
                                    p == 0.0f || formulas::keep_unit(mask_seed, batch.example(r),
                                                                     col_offset + c, p);
                                const double want = keep ? m0.at(r, c) / (1.0 - p) : 0.0;
                                ASSERT_TRUE(
                                    testing::near(m.at(r, c), want, std::fabs(want), 1e-6, 0))
                                    << "rows=" << rows << " cols=" << cols << " p=" << p << " at "
                                    << r << "," << c;
                                if (!keep) {
                                    ASSERT_EQ(m.at(r, c), 0.0f);
                                }
                            }
                            for (size_t c = cols; c < m.ld; ++c) ASSERT_EQ(m.at(r, c), kPad);
                        }
                        ++seed;
                    }
}

TEST(Dropout, ZeroProbabilityIsANoOp) {
    CpuBackend backend(2);
    Dense<float> m = testing::random_dense<float>(9, 11, 1, 2);
    m.at(3, 4) = std::nanf("");
    const Dense<float> m0 = m;
    BatchRows rows;
    rows.batch = 9;
    backend.dropout(inverted(0.0f, 5, rows, 0), m.view());
    EXPECT_EQ(0, std::memcmp(m.data.data(), m0.data.data(), m.data.size() * sizeof(float)));
}

TEST(Dropout, MaskFractionIsNearP) {
    CpuBackend backend(2);
    for (float p : {0.1f, 0.3f, 0.5f, 0.9f}) {
        Dense<float> m(200, 500, 0, 1.0f);
        BatchRows rows;
        rows.first_row = 12345;
        rows.batch = 200;
        backend.dropout(inverted(p, 77, rows, 0), m.view());
        size_t dropped = 0;
        for (size_t r = 0; r < 200; ++r)
            for (size_t c = 0; c < 500; ++c) {
                const float v = m.at(r, c);
                if (v == 0.0f) {
                    ++dropped;
                } else {
                    ASSERT_NEAR(v, 1.0 / (1.0 - p), 1e-5);
                }
            }
        EXPECT_NEAR(double(dropped) / (200.0 * 500.0), p, 0.01) << "p=" << p;
    }
}

TEST(Dropout, ForwardAndBackwardUseTheSameMask) {
    CpuBackend backend(2);
    const testing::TestBatch batch = testing::make_batch(100, 64, true, 4);
    Dense<float> act = testing::random_dense<float>(64, 130, 0, 1, 0.5, 1.0);
    Dense<float> grad = testing::random_dense<float>(64, 130, 0, 2, 0.5, 1.0);
    const Dense<float> grad0 = grad;
    backend.dropout(inverted(0.3f, 99, batch.view(), 40), act.view());
    backend.dropout(inverted(0.3f, 99, batch.view(), 40), grad.view());
    size_t dropped = 0;
    for (size_t i = 0; i < act.data.size(); ++i) {
        ASSERT_EQ(act.data[i] == 0.0f, grad.data[i] == 0.0f) << i;
        if (grad.data[i] != 0.0f) {
            ASSERT_FLOAT_EQ(grad.data[i], grad0.data[i] / 0.7f);
        }
        dropped += act.data[i] == 0.0f;
    }
    EXPECT_GT(dropped, 0u);
}

TEST(Dropout, MaskIsIndependentOfTheColumnSplit) {
    CpuBackend backend(2);
    const testing::TestBatch batch = testing::make_batch(50, 33, true, 8);
    const Dense<float> m0 = testing::random_dense<float>(33, 10, 0, 3);
    Dense<float> whole = m0, halves = m0;
    backend.dropout(inverted(0.4f, 2024, batch.view(), 0), whole.view());
    // Two [B, 5] column slices of the same buffer (ld 10), the second at global column 5.
    MatrixView left{halves.data.data(), 33, 5, 10};
    MatrixView right{halves.data.data() + 5, 33, 5, 10};
    backend.dropout(inverted(0.4f, 2024, batch.view(), 0), left);
    backend.dropout(inverted(0.4f, 2024, batch.view(), 5), right);
    EXPECT_EQ(0, std::memcmp(whole.data.data(), halves.data.data(), whole.data.size() * 4));
}

TEST(Dropout, MaskFollowsTheExampleNotTheBatchPosition) {
    CpuBackend backend(1);
    // Batch A holds examples 10..13 in order; batch B holds 13, 11 (permuted).
    Dense<float> a(4, 64, 0, 1.0f), b(2, 64, 0, 1.0f);
    BatchRows ra;
    ra.first_row = 10;
    ra.batch = 4;
    const std::vector<uint32_t> ids = {13, 11};
    BatchRows rb;
    rb.rows = ids.data();
    rb.batch = 2;
    backend.dropout(inverted(0.5f, 6, ra, 0), a.view());
    backend.dropout(inverted(0.5f, 6, rb, 0), b.view());
    for (size_t c = 0; c < 64; ++c) {
        EXPECT_EQ(b.at(0, c), a.at(3, c));
        EXPECT_EQ(b.at(1, c), a.at(1, c));
    }
}

TEST(Dropout, ThreadCountIndependent) {
    CpuBackend one(1), two(2);
    const testing::TestBatch batch = testing::make_batch(600, 512, true, 1);
    Dense<float> m1 = testing::random_dense<float>(512, 300, 4, 5), m2 = m1;
    one.dropout(inverted(0.25f, 3, batch.view(), 1000), m1.view());
    two.dropout(inverted(0.25f, 3, batch.view(), 1000), m2.view());
    EXPECT_EQ(0, std::memcmp(m1.data.data(), m2.data.data(), m1.data.size() * sizeof(float)));
}

TEST(Dropout, DoubleInstantiationUsesTheSameMask) {
    Dense<float> f(5, 20, 0, 1.0f);
    Dense<double> d(5, 20, 0, 1.0);
    BatchRows rows;
    rows.first_row = 3;
    rows.batch = 5;
    CpuBackend backend(1);
    backend.dropout(inverted(0.3f, 11, rows, 2), f.view());
    cpu::dropout(inverted(0.3f, 11, rows, 2), d.mat(), 1);
    for (size_t i = 0; i < f.data.size(); ++i) EXPECT_NEAR(f.data[i], d.data[i], 1e-6);
}

// Alpha dropout (Klambauer et al. 2017, DSSTNE's ELU/SELU dropout): kept x -> a x + b, dropped
// -> a s + b with s = -lambda alpha, a = (q + s^2 p q)^-1/2, b = -a p s, q = 1 - p.
TEST(AlphaDropout, MatchesThePaperFormula) {
    const double lambda = 1.0507009873554805, alpha = 1.6732632423543772;
    const double s = -lambda * alpha;
    for (float p : {0.05f, 0.2f, 0.5f}) {
        const double q = 1.0 - p;
        const double a = 1.0 / std::sqrt(q + s * s * p * q);
        const double b = -a * p * s;
        const formulas::DropoutParams d = formulas::alpha_dropout(p, 9, float(s));
        EXPECT_NEAR(d.scale, a, 1e-6) << p;
        EXPECT_NEAR(d.shift, b, 1e-6) << p;
        EXPECT_NEAR(d.dropped, a * s + b, 1e-6) << p;
        EXPECT_EQ(d.p, p);
        EXPECT_EQ(d.seed, 9u);
        const formulas::DropoutParams inv = formulas::inverted_dropout(p, 9);
        EXPECT_FLOAT_EQ(inv.scale, 1.0f / (1.0f - p));
        EXPECT_EQ(inv.shift, 0.0f);
        EXPECT_EQ(inv.dropped, 0.0f);
    }
    const formulas::DropoutParams off = formulas::alpha_dropout(0.0f, 1, float(s));
    EXPECT_EQ(off.scale, 1.0f);
    EXPECT_EQ(off.shift, 0.0f);
}

TEST(AlphaDropout, OpAppliesTheMapAndKeepsSeluMoments) {
    CpuBackend backend(2);
    const double lambda = 1.0507009873554805, alpha = 1.6732632423543772;
    const size_t rows = 400, cols = 500;
    // SELU of standard normal pre-activations: mean 0, variance 1 (SELU's fixed point).
    Dense<float> m(rows, cols, 3, 7.0f);
    std::mt19937_64 rng(5);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) {
            const double z = normal(rng);
            m.at(r, c) = float(lambda * (z > 0 ? z : alpha * (std::exp(z) - 1.0)));
        }
    const Dense<float> m0 = m;
    DropoutMask mask;
    mask.params = formulas::alpha_dropout(0.2f, 31, float(-lambda * alpha));
    mask.rows.first_row = 1000;
    mask.rows.batch = rows;
    mask.col_offset = 3;
    backend.dropout(mask, m.view());
    double sum = 0, sum2 = 0;
    size_t dropped = 0;
    for (size_t r = 0; r < rows; ++r) {
        for (size_t c = 0; c < cols; ++c) {
            const bool keep = formulas::keep_unit(31, 1000 + r, 3 + c, 0.2f);
            const double want = keep ? double(mask.params.scale) * m0.at(r, c) + mask.params.shift
                                     : double(mask.params.dropped);
            ASSERT_NEAR(m.at(r, c), want, 1e-5) << r << "," << c;
            dropped += keep ? 0 : 1;
            sum += m.at(r, c);
            sum2 += double(m.at(r, c)) * m.at(r, c);
        }
        for (size_t c = cols; c < m.ld; ++c) ASSERT_EQ(m.at(r, c), 7.0f);
    }
    const double n = double(rows * cols);
    EXPECT_NEAR(double(dropped) / n, 0.2, 0.01);
    const double mean = sum / n;
    EXPECT_NEAR(mean, 0.0, 0.01);
    EXPECT_NEAR(sum2 / n - mean * mean, 1.0, 0.02);
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

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

}  // namespace
}  // namespace sparsenet::parity
