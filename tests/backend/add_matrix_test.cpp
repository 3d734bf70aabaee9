// add_matrix (Skip connections) against its definition: every beta, padded views (ld > cols,
// padding never touched), NaN overwritten by beta == 0, 1 against 2 threads bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"

namespace sparsenet {
namespace {

using testing::Dense;

constexpr float kPad = -7.5f;

void expect_padding_untouched(const Dense<float>& m, const char* what) {
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t c = m.cols; c < m.ld; ++c) ASSERT_EQ(m.at(r, c), kPad) << what << " " << r;
}

// ---------------------------------------------------------------- add_matrix

TEST(AddMatrix, MatchesDefinitionForEveryBeta) {
    CpuBackend backend(2);
    for (const size_t rows : {size_t(0), size_t(1), size_t(7), size_t(300)}) {
        for (const size_t cols : {size_t(1), size_t(5), size_t(130)}) {
            for (const float alpha : {1.0f, -0.5f}) {
                for (const float beta : {0.0f, 1.0f, 0.25f}) {
                    SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                                 " alpha=" + std::to_string(alpha) +
                                 " beta=" + std::to_string(beta));
                    const Dense<float> x =
                        testing::random_dense<float>(rows, cols, 3, rows * 31 + cols, -2, 2, kPad);
                    Dense<float> y =
                        testing::random_dense<float>(rows, cols, 2, rows * 17 + cols, -2, 2, kPad);
                    if (rows > 0 && beta == 0.0f) {
                        y.at(0, 0) = std::numeric_limits<float>::quiet_NaN();
                    }
                    const Dense<float> y0 = y;
                    backend.add_matrix(alpha, x.cview(), beta, y.view());
                    for (size_t r = 0; r < rows; ++r) {
                        for (size_t c = 0; c < cols; ++c) {
                            const double want = double(alpha) * x.at(r, c) +
                                                (beta == 0.0f ? 0.0 : double(beta) * y0.at(r, c));
                            ASSERT_TRUE(testing::near(y.at(r, c), want, std::fabs(want)))
                                << r << "," << c << " got " << y.at(r, c) << " want " << want;
                        }
                    }
                    expect_padding_untouched(y, "y");
                }
            }
        }
    }
}

TEST(AddMatrix, OneAndTwoThreadsAgreeBitForBit) {
    const Dense<float> x = testing::random_dense<float>(513, 257, 0, 1);
    Dense<float> a = testing::random_dense<float>(513, 257, 0, 2);
    Dense<float> b = a;
    CpuBackend one(1), two(2);
    one.add_matrix(0.7f, x.cview(), 1.0f, a.view());
    two.add_matrix(0.7f, x.cview(), 1.0f, b.view());
    EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)), 0);
}

TEST(AddMatrix, ShapeMismatchIsInternalError) {
    CpuBackend backend(1);
    const Dense<float> x(3, 4);
    Dense<float> y(3, 5);
    try {
        backend.add_matrix(1.0f, x.cview(), 1.0f, y.view());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInternal);
    }
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

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

}  // namespace
}  // namespace sparsenet::parity
