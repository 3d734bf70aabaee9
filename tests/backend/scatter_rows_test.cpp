// scatter_rows (a shared matrix's dense gradient gaining a sparse Input use's row-sparse one)
// against its definition: every beta, padded views, NaN overwritten by beta == 0, untouched rows
// kept bit for bit with beta == 1, 1 against 2 threads bit for bit, broken contracts.
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

// ---------------------------------------------------------------- scatter_rows

struct RowGrad {
    std::vector<uint32_t> rows;
    uint32_t count = 0;
    std::vector<float> values;
    size_t capacity = 0, cols = 0;
    SparseRowGrad view() { return {rows.data(), &count, values.data(), capacity, cols}; }
};

// `count` distinct sorted rows of [0, dense_rows), values in [-1, 1); capacity > count.
RowGrad random_row_grad(size_t dense_rows, size_t count, size_t cols, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> all(dense_rows);
    for (size_t i = 0; i < dense_rows; ++i) all[i] = uint32_t(i);
    std::shuffle(all.begin(), all.end(), rng);
    RowGrad g;
    g.rows.assign(all.begin(), all.begin() + count);
    std::sort(g.rows.begin(), g.rows.end());
    g.count = uint32_t(count);
    g.capacity = count + 2;
    g.rows.resize(g.capacity, 12345u);  // beyond count: garbage the op must not read
    g.cols = cols;
    std::uniform_real_distribution<double> u(-1, 1);
    g.values.resize(g.capacity * cols);
    for (float& v : g.values) v = float(u(rng));
    return g;
}

TEST(ScatterRows, MatchesDefinitionForEveryBeta) {
    CpuBackend backend(2);
    for (const size_t rows : {size_t(1), size_t(9), size_t(400)}) {
        for (const size_t cols : {size_t(1), size_t(6), size_t(130)}) {
            for (const size_t count : {size_t(0), size_t(1), rows / 2, rows}) {
                for (const float beta : {0.0f, 1.0f, 0.5f}) {
                    SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                                 " count=" + std::to_string(count) +
                                 " beta=" + std::to_string(beta));
                    RowGrad g = random_row_grad(rows, count, cols, rows * 7 + count);
                    Dense<float> d =
                        testing::random_dense<float>(rows, cols, 3, rows + cols, -1, 1, kPad);
                    if (beta == 0.0f) d.at(rows - 1, 0) = std::numeric_limits<float>::quiet_NaN();
                    const Dense<float> d0 = d;
                    backend.scatter_rows(g.view(), beta, d.view());
                    std::vector<int> index(rows, -1);
                    for (size_t i = 0; i < count; ++i) index[g.rows[i]] = int(i);
                    for (size_t r = 0; r < rows; ++r) {
                        for (size_t c = 0; c < cols; ++c) {
                            double want = beta == 0.0f ? 0.0 : double(beta) * d0.at(r, c);
                            if (index[r] >= 0) want += g.values[size_t(index[r]) * cols + c];
                            ASSERT_TRUE(testing::near(d.at(r, c), want, std::fabs(want)))
                                << r << "," << c << " got " << d.at(r, c) << " want " << want;
                        }
                    }
                    expect_padding_untouched(d, "dense");
                }
            }
        }
    }
}

TEST(ScatterRows, BetaOneLeavesUntouchedRowsBitForBit) {
    CpuBackend backend(2);
    RowGrad g = random_row_grad(50, 5, 8, 3);
    Dense<float> d = testing::random_dense<float>(50, 8, 0, 4);
    const Dense<float> d0 = d;
    backend.scatter_rows(g.view(), 1.0f, d.view());
    for (size_t r = 0; r < 50; ++r) {
        if (std::find(g.rows.begin(), g.rows.begin() + g.count, uint32_t(r)) !=
            g.rows.begin() + g.count)
            continue;
        for (size_t c = 0; c < 8; ++c) ASSERT_EQ(d.at(r, c), d0.at(r, c)) << r;
    }
}

TEST(ScatterRows, OneAndTwoThreadsAgreeBitForBit) {
    RowGrad g = random_row_grad(3000, 1500, 64, 5);
    Dense<float> a = testing::random_dense<float>(3000, 64, 0, 6);
    Dense<float> b = a;
    CpuBackend one(1), two(2);
    one.scatter_rows(g.view(), 0.5f, a.view());
    two.scatter_rows(g.view(), 0.5f, b.view());
    EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)), 0);
}

TEST(ScatterRows, BrokenContractsAreInternalErrors) {
    CpuBackend backend(1);
    Dense<float> d(10, 4);
    RowGrad wide = random_row_grad(10, 3, 5, 7);  // 5 columns for a 4-column matrix
    RowGrad out_of_range = random_row_grad(20, 3, 4, 8);
    out_of_range.rows[2] = 15;
    RowGrad over = random_row_grad(10, 3, 4, 9);
    over.count = uint32_t(over.capacity + 1);
    for (RowGrad* g : {&wide, &out_of_range, &over}) {
        try {
            backend.scatter_rows(g->view(), 0.0f, d.view());
            ADD_FAILURE() << "no error";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kInternal) << e.what();
        }
    }
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

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

}  // namespace
}  // namespace sparsenet::parity
