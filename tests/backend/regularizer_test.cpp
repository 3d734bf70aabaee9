// sparseness_penalty, normalize_rows (DeltaNorm) and normalize_columns (WeightNorm) against
// double references written here from the definitions (KL divergence, L2 norm clipping).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"

namespace sparsenet {
namespace {

using testing::Dense;

double kl(double p, double r) {
    double v = 0;
    if (p > 0) v += p * std::log(p / r);
    if (p < 1) v += (1 - p) * std::log((1 - p) / (1 - r));
    return v;
}

struct PenaltyResult {
    std::vector<float> delta;
    double loss = 0;
};

void check_penalty(Backend& backend, size_t rows, size_t cols, float p, float beta, float scale,
                   bool with_delta, uint64_t seed, PenaltyResult* out = nullptr) {
    const float kPad = -3.0f;
    // Activations in (0, 1), some columns pushed to the clamp (all zeros / all ones).
    Dense<float> a = testing::random_dense<float>(rows, cols, 2, seed, 0.01, 0.99, kPad);
    if (cols > 3) {
        for (size_t r = 0; r < rows; ++r) {
            a.at(r, 1) = 0.0f;
            a.at(r, 2) = 1.0f;
        }
    }
    Dense<float> delta = testing::random_dense<float>(rows, cols, 1, seed + 1, -1, 1, kPad);
    const Dense<float> d0 = delta;
    double loss = 0.5;
    MatrixView dv = with_delta ? delta.view() : MatrixView{};
    backend.sparseness_penalty(p, beta, a.cview(), scale, dv, &loss);

    const std::string what = "rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                             " p=" + std::to_string(p) + (with_delta ? "" : " loss-only");
    double want_loss = 0;
    for (size_t c = 0; c < cols; ++c) {
        double mean = 0;
        for (size_t r = 0; r < rows; ++r) mean += a.at(r, c);
        mean /= double(rows);
        const double rho = std::min(std::max(mean, 1e-7), 1.0 - 1e-7);
        want_loss += double(rows) * beta * kl(p, rho);
        // Clamped means (columns 1 and 2: all 0 / all 1) pass no gradient.
        const bool clamped = rho != mean;
        const double g = clamped ? 0.0 : double(scale) * beta * (-p / rho + (1 - p) / (1 - rho));
        for (size_t r = 0; r < rows; ++r) {
            const double want = double(d0.at(r, c)) + (with_delta ? g : 0.0);
            ASSERT_TRUE(testing::near(delta.at(r, c), want, std::fabs(want), 1e-5, 1e-6))
                << what << " at " << r << "," << c << " got " << delta.at(r, c) << " want " << want;
        }
    }
    for (size_t r = 0; r < rows; ++r) ASSERT_EQ(delta.at(r, cols), kPad) << what;
    ASSERT_TRUE(testing::near(loss - 0.5, want_loss, std::fabs(want_loss), 1e-9, 1e-9))
        << what << " loss " << loss - 0.5 << " want " << want_loss;
    if (out != nullptr) {
        out->delta = delta.data;
        out->loss = loss;
    }
}

TEST(SparsenessPenalty, MatchesReferenceOverGrid) {
    CpuBackend backend(2);
    uint64_t seed = 1;
    for (size_t rows : {1, 7, 64})
        for (size_t cols : {1, 5, 130, 257})
            for (float p : {0.0f, 0.05f, 0.5f, 1.0f})
                for (bool with_delta : {true, false}) {
                    check_penalty(backend, rows, cols, p, 2.0f, 1.0f / float(rows), with_delta,
                                  seed++);
                    if (HasFatalFailure()) return;
                }
}

// A known value: two examples, one unit with activations 0.2 and 0.4 (mean 0.3), p 0.1, beta 2.
TEST(SparsenessPenalty, KnownValue) {
    CpuBackend backend(1);
    Dense<float> a(2, 1), delta(2, 1);
    a.at(0, 0) = 0.2f;
    a.at(1, 0) = 0.4f;
    double loss = 0;
    MatrixView dv = delta.view();
    backend.sparseness_penalty(0.1f, 2.0f, a.cview(), 0.5f, dv, &loss);
    const double rho = 0.3;
    const double want_kl = 0.1 * std::log(0.1 / 0.3) + 0.9 * std::log(0.9 / 0.7);
    EXPECT_NEAR(loss, 2 * 2.0 * want_kl, 1e-6);
    const double g = 0.5 * 2.0 * (-0.1 / rho + 0.9 / 0.7);
    EXPECT_NEAR(delta.at(0, 0), g, 1e-6);
    EXPECT_NEAR(delta.at(1, 0), g, 1e-6);
}

TEST(SparsenessPenalty, DeterministicAcrossThreadCounts) {
    CpuBackend one(1), two(2);
    PenaltyResult r1, r2;
    check_penalty(one, 500, 700, 0.05f, 1.5f, 1.0f / 500, true, 77, &r1);
    check_penalty(two, 500, 700, 0.05f, 1.5f, 1.0f / 500, true, 77, &r2);
    ASSERT_EQ(0, std::memcmp(&r1.loss, &r2.loss, sizeof(double)));
    ASSERT_EQ(0, std::memcmp(r1.delta.data(), r2.delta.data(), r1.delta.size() * 4));
}

// The rows (DeltaNorm) or columns (WeightNorm) of m with their L2 norms in double.
std::vector<double> norms(const Dense<float>& m, bool rows) {
    std::vector<double> n(rows ? m.rows : m.cols, 0.0);
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t c = 0; c < m.cols; ++c) n[rows ? r : c] += double(m.at(r, c)) * m.at(r, c);
    for (double& v : n) v = std::sqrt(v);
    return n;
}

// After the op: vectors longer than max_norm have norm max_norm and the same direction; the
// others are bit-identical; padding is untouched.
void check_clip(Backend& backend, size_t rows, size_t cols, bool by_rows, uint64_t seed) {
    const float kPad = 123.0f;
    Dense<float> m = testing::random_dense<float>(rows, cols, 2, seed, -1, 1, kPad);
    const Dense<float> m0 = m;
    const std::vector<double> before = norms(m0, by_rows);
    // The median norm as the limit: about half of the vectors are clipped.
    std::vector<double> sorted = before;
    std::sort(sorted.begin(), sorted.end());
    const float max_norm = float(sorted[sorted.size() / 2]) * 0.999f;
    if (by_rows) {
        backend.normalize_rows(max_norm, m.view());
    } else {
        backend.normalize_columns(max_norm, m.view());
    }
    const std::vector<double> after = norms(m, by_rows);
    size_t clipped = 0;
    const std::string what = std::string(by_rows ? "rows" : "columns") +
                             " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
    for (size_t i = 0; i < before.size(); ++i) {
        if (before[i] > max_norm) {
            ++clipped;
            ASSERT_NEAR(after[i], max_norm, 1e-6 * max_norm) << what << " vector " << i;
        } else {
            ASSERT_EQ(after[i], before[i]) << what << " vector " << i;
        }
        const double f = before[i] > max_norm ? max_norm / before[i] : 1.0;
        for (size_t k = 0; k < (by_rows ? cols : rows); ++k) {
            const size_t r = by_rows ? i : k, c = by_rows ? k : i;
            const double want = double(m0.at(r, c)) * f;
            ASSERT_NEAR(m.at(r, c), want, 1e-6 * std::fabs(want) + 1e-12) << what;
        }
    }
    EXPECT_GT(clipped, 0u) << what;
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = cols; c < m.ld; ++c) ASSERT_EQ(m.at(r, c), kPad) << what;
}

TEST(NormalizeRows, ClipsLongRowsOnly) {
    CpuBackend backend(2);
    uint64_t seed = 10;
    for (size_t rows : {2, 7, 64, 300})
        for (size_t cols : {1, 5, 130}) check_clip(backend, rows, cols, true, seed++);
}

TEST(NormalizeColumns, ClipsLongColumnsOnly) {
    CpuBackend backend(2);
    uint64_t seed = 50;
    for (size_t rows : {1, 5, 64, 300})
        for (size_t cols : {2, 7, 130, 300}) check_clip(backend, rows, cols, false, seed++);
}

TEST(NormalizeColumns, DeterministicAcrossThreadCounts) {
    CpuBackend one(1), two(2);
    Dense<float> m1 = testing::random_dense<float>(600, 500, 0, 4, -1, 1), m2 = m1;
    one.normalize_columns(5.0f, m1.view());
    two.normalize_columns(5.0f, m2.view());
    EXPECT_EQ(0, std::memcmp(m1.data.data(), m2.data.data(), m1.data.size() * sizeof(float)));
    one.normalize_rows(3.0f, m1.view());
    two.normalize_rows(3.0f, m2.view());
    EXPECT_EQ(0, std::memcmp(m1.data.data(), m2.data.data(), m1.data.size() * sizeof(float)));
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

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

}  // namespace
}  // namespace sparsenet::parity
