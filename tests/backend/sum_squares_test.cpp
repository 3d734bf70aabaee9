// sum_squares (Backend::sum_squares): the sums of the squares of several matrices in one call,
// the numerical guard's figures of every layer (Training::record_health).
//
//  * CPU: each part against a double reference summed here in element order (padded views with
//    NaN in the padding, empty parts, one element, parts longer than a chunk of 8,192 and not a
//    multiple of it, values near FLT_MAX whose squares overflow float but not double); NaN and
//    infinities reach the result; the same bits for 1 and 2 threads.
//  * CUDA parity: the same parts (and more than one launch's worth, 48) against the CPU, relative
//    1e-6 (both sum exact double squares; only the order of the additions differs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"

namespace sparsenet {
namespace {

using testing::Dense;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Parts of every interesting shape: [rows, cols] + padding of NaN (never read).
std::vector<Dense<float>> shapes(uint64_t seed) {
    std::vector<Dense<float>> parts;
    const size_t dims[][3] = {{0, 5, 0},    {3, 0, 2},    {1, 1, 0},    {1, 1024, 0},  {4, 1000, 3},
                              {1, 8192, 0}, {1, 8193, 1}, {7, 3001, 5}, {256, 100, 12}};
    for (const auto& d : dims)
        parts.push_back(testing::random_dense<float>(d[0], d[1], d[2], ++seed, -3.0, 3.0, kNaN));
    return parts;
}

std::vector<ConstMatrixView> views(const std::vector<Dense<float>>& parts) {
    std::vector<ConstMatrixView> v;
    for (const Dense<float>& p : parts) v.push_back(p.cview());
    return v;
}

double reference(const Dense<float>& m) {
    double sum = 0.0;
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t c = 0; c < m.cols; ++c) sum += double(m.at(r, c)) * double(m.at(r, c));
    return sum;
}

TEST(SumSquares, EachPartMatchesADoubleReference) {
    CpuBackend backend(2);
    std::vector<Dense<float>> parts = shapes(10);
    // Squares beyond FLT_MAX: summed in double, the float result is infinite.
    parts.push_back(Dense<float>(1, 3, 1, kNaN));
    parts.back().at(0, 0) = 3e38f;
    parts.back().at(0, 1) = 1e-3f;
    parts.back().at(0, 2) = -2e19f;  // 4e38: in double only
    std::vector<float> out(parts.size(), -1.0f);
    backend.sum_squares(views(parts), out.data());
    for (size_t i = 0; i < parts.size(); ++i) {
        const double want = reference(parts[i]);
        SCOPED_TRACE("part " + std::to_string(i) + " [" + std::to_string(parts[i].rows) + ", " +
                     std::to_string(parts[i].cols) + "]");
        if (std::isinf(float(want))) {
            EXPECT_TRUE(std::isinf(out[i]));
            continue;
        }
        EXPECT_NEAR(out[i], want, 1e-6 * want);
        if (parts[i].rows * parts[i].cols == 0) {
            EXPECT_EQ(out[i], 0.0f);
        }
    }
    EXPECT_TRUE(std::isinf(out.back()));
}

TEST(SumSquares, NonFiniteValuesReachTheResult) {
    CpuBackend backend(2);
    Dense<float> nan = testing::random_dense<float>(3, 9000, 2, 1);
    Dense<float> inf = testing::random_dense<float>(2, 50, 0, 2);
    nan.at(2, 8999) = kNaN;  // the last element of the last chunk
    inf.at(0, 7) = -kInf;
    std::vector<float> out(2);
    backend.sum_squares({nan.cview(), inf.cview()}, out.data());
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_EQ(out[1], kInf);
}

TEST(SumSquares, TheSameBitsForEveryThreadCount) {
    const std::vector<Dense<float>> parts = shapes(40);
    std::vector<float> one(parts.size()), two(parts.size());
    CpuBackend(1).sum_squares(views(parts), one.data());
    CpuBackend(2).sum_squares(views(parts), two.data());
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

TEST(SumSquares, OpName) {
    EXPECT_STREQ(to_string(Op::kSumSquares), "sum_squares");
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

TEST_F(CudaParity, SumSquaresMatchesTheCpu) {
    // Two rounds: the shapes above, and 50 parts (more than one launch's 48).
    for (size_t round = 0; round < 2; ++round) {
        std::vector<Dense<float>> parts = sparsenet::shapes(100 + round);
        if (round == 1) {
            parts.clear();
            for (size_t i = 0; i < 50; ++i)
                parts.push_back(testing::random_dense<float>(1 + i % 4, 1 + 997 * i % 9000, i % 3,
                                                             200 + i, -2.0, 2.0, kNaN));
        }
        std::vector<DevMat> dev_parts;
        std::vector<ConstMatrixView> on_device;
        dev_parts.reserve(parts.size());
        for (const Dense<float>& p : parts) {
            dev_parts.emplace_back(dev(), p);
            on_device.push_back(dev_parts.back().cview());
        }
        std::vector<float> want(parts.size());
        cpu_.sum_squares(sparsenet::views(parts), want.data());
        DeviceArray<float> out(dev(), parts.size(), "sums");
        dev().sum_squares(on_device, out.data());
        const std::vector<float> got = fetch(out, parts.size());
        for (size_t i = 0; i < parts.size(); ++i)
            EXPECT_TRUE(close_scalar(want[i], got[i], 1e-6, 0.0))
                << "round " << round << " part " << i << " cpu " << want[i] << " device " << got[i];
    }
}

}  // namespace
}  // namespace sparsenet::parity
