// The exact sparse update of Momentum and Nesterov on a row clock (Backend::catch_up_rows and
// optimizer_step_rows with a RowClock): rows a batch does not touch are left alone and caught up
// over their skipped steps in closed form before they are read; the result equals the every-row
// exact update (SparseUpdate::kExact without a clock) to rounding. In double the closed form is
// checked to 1e-12 (it is the same recurrence, not an approximation); in float over a run to the
// rounding of the every-row path's float steps; then the parity of the device kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops_dense.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/optimizer.h"

namespace sparsenet {
namespace {

using testing::Dense;

struct Rule {
    OptimizerKind kind;
    float l2;
};
constexpr Rule kRules[] = {{OptimizerKind::kMomentum, 0.0f},
                           {OptimizerKind::kMomentum, 0.01f},
                           {OptimizerKind::kNesterov, 0.0f},
                           {OptimizerKind::kNesterov, 0.01f}};

formulas::OptimizerStep rule_step(Rule r) {
    formulas::OptimizerStep s;
    s.kind = r.kind;
    s.learning_rate = 0.05f;
    s.mu = 0.9f;
    s.l2 = r.l2;
    return s;
}

std::string what(Rule r) {
    return std::string(to_string(r.kind)) + " l2=" + std::to_string(r.l2);
}

// One step's batch: the touched rows (sorted, unique; about one in `every`), and a 3-example
// CSR batch storing each of them at least once (example 0 all of them, examples 1 and 2 a few
// again: duplicates across and within the batch must be caught up once).
struct StepBatch {
    std::vector<uint32_t> rows;
    Dataset data;
    testing::TestBatch batch;
};

StepBatch make_step_batch(size_t rows, std::mt19937_64& rng, unsigned every) {
    StepBatch s;
    for (uint32_t r = 0; r < rows; ++r)
        if (rng() % every == 0) s.rows.push_back(r);
    s.data.rows = 3;
    s.data.cols = uint32_t(rows);
    s.data.offsets = {0};
    for (int ex = 0; ex < 3; ++ex) {
        for (uint32_t r : s.rows)
            if (ex == 0 || rng() % 2 == 0) s.data.indices.push_back(r);
        s.data.offsets.push_back(s.data.indices.size());
    }
    s.batch.size = 3;
    return s;
}

template <class T>
double max_abs_diff(const Dense<T>& a, const Dense<T>& b, double* scale) {
    double d = 0.0, m = 0.0;
    for (size_t r = 0; r < a.rows; ++r)
        for (size_t c = 0; c < a.cols; ++c) {
            d = std::max(d, std::fabs(double(a.at(r, c)) - double(b.at(r, c))));
            m = std::max(m, std::fabs(double(a.at(r, c))));
        }
    *scale = m;
    return d;
}

// The closed form is the recurrence: M^k computed by squaring equals k single steps in double.
TEST(RowCatchUp, CoefficientsAreThePowersOfOneStep) {
    for (Rule rule : kRules) {
        const formulas::OptimizerStep p = rule_step(rule);
        for (uint32_t k : {0u, 1u, 2u, 3u, 7u, 64u, 1000u}) {
            double s = 0.3, w = -0.7;
            for (uint32_t i = 0; i < k; ++i) {
                const double a = double(p.learning_rate) * double(p.l2), mu = p.mu;
                const double s_new = mu * s - a * w;
                w = rule.kind == OptimizerKind::kNesterov ? w + s_new + mu * (s_new - s)
                                                          : w + s_new;
                s = s_new;
            }
            double s2 = 0.3, w2 = -0.7;
            formulas::catch_up_element(formulas::catch_up_coefficients(p, k), w2, s2);
            EXPECT_NEAR(w2, w, 1e-12 * (1 + std::fabs(w))) << what(rule) << " k=" << k;
            EXPECT_NEAR(s2, s, 1e-12 * (1 + std::fabs(s))) << what(rule) << " k=" << k;
        }
    }
}

TEST(RowCatchUp, OnlyMomentumAndNesterovWithoutL1AndConstantRateWithL2) {
    formulas::OptimizerStep p = rule_step({OptimizerKind::kMomentum, 0.0f});
    EXPECT_TRUE(formulas::catch_up_exact(p, false));  // no L2: the rate drops out
    p.l2 = 0.01f;
    EXPECT_TRUE(formulas::catch_up_exact(p, true));
    EXPECT_FALSE(formulas::catch_up_exact(p, false));  // L2 with Decay
    p.l2 = 0.0f;
    p.l1 = 0.001f;
    EXPECT_FALSE(formulas::catch_up_exact(p, true));
    for (OptimizerKind k :
         {OptimizerKind::kSgd, OptimizerKind::kAdaGrad, OptimizerKind::kRmsProp,
          OptimizerKind::kAdaDelta, OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
        p = rule_step({k, 0.0f});
        EXPECT_FALSE(formulas::catch_up_exact(p, true)) << to_string(k);
    }
}

// In double, a run on the clock equals the every-row run to 1e-12: the difference is rounding
// of double arithmetic only.
TEST(RowCatchUp, DoubleRunEqualsEveryRowUpdate) {
    for (Rule rule : kRules) {
        const size_t rows = 120, cols = 9, pad = 1;
        Dense<double> w_ref = testing::random_dense<double>(rows, cols, pad, 4);
        Dense<double> w = w_ref, s_ref(rows, cols, pad), s(rows, cols, pad);
        std::vector<uint32_t> clock(rows, 0);
        cpu::RowsStepScratch<double> scratch_ref, scratch;
        std::mt19937_64 rng(11);
        const formulas::OptimizerStep p = rule_step(rule);
        const uint32_t steps = 60;
        for (uint32_t t = 1; t <= steps; ++t) {
            StepBatch b = make_step_batch(rows, rng, 7);
            std::vector<double> values_d;
            const cpu::CsrT<double> x = testing::csr_view_d(b.data, b.batch, values_d);
            cpu::catch_up_rows(p, w.mat(), &x, s.data.data(), RowClock{clock.data(), t - 1},
                               scratch.behind, 2);
            const Dense<double> g =
                testing::random_dense<double>(std::max<size_t>(b.rows.size(), 1), cols, 0, t);
            std::vector<uint32_t> ids = b.rows;
            ids.resize(std::max<size_t>(ids.size(), 1));
            uint32_t count = uint32_t(b.rows.size());
            std::vector<double> gv(g.data.begin(), g.data.end());
            const cpu::RowGradT<double> grad{ids.data(), &count, gv.data(), ids.size(), cols};
            cpu::optimizer_step_rows(p, w.mat(), grad, s.data.data(), static_cast<double*>(nullptr),
                                     SparseUpdate::kExact, RowClock{clock.data(), t}, scratch, 2);
            cpu::optimizer_step_rows(p, w_ref.mat(), grad, s_ref.data.data(),
                                     static_cast<double*>(nullptr), SparseUpdate::kExact,
                                     RowClock{}, scratch_ref, 2);
        }
        cpu::catch_up_rows<double>(p, w.mat(), nullptr, s.data.data(),
                                   RowClock{clock.data(), steps}, scratch.behind, 2);
        double scale = 0;
        EXPECT_LE(max_abs_diff(w_ref, w, &scale), 1e-12 * (1 + scale)) << what(rule);
        EXPECT_LE(max_abs_diff(s_ref, s, &scale), 1e-12 * (1 + scale)) << what(rule);
        for (uint32_t c : clock) ASSERT_EQ(c, steps);
    }
}

bool same_row(const Dense<float>& a, const Dense<float>& b, size_t r) {
    return std::memcmp(&a.at(r, 0), &b.at(r, 0), a.cols * sizeof(float)) == 0;
}

// In float through the backend: a run of 200 steps touching about one row in ten equals the
// every-row update to float rounding, and a step leaves the rows its batch does not store alone.
// Tolerance: each float step of the every-row path rounds w and s (a few ulps of the larger of
// |w|, |s|); the clock replaces up to k of them by one product with coefficients rounded to
// float, so the two differ by the every-row path's accumulated rounding, at most about
// steps * 2 * 2^-24 = 2.4e-5 of the values' scale; 3e-5 of the largest |value| bounds it
// (measured: 5.4e-7 for the weights, 1.2e-7 for the velocities: the roundings mostly cancel).
TEST(RowCatchUp, FloatRunEqualsEveryRowUpdateToRounding) {
    CpuBackend backend(2);
    for (Rule rule : kRules) {
        const size_t rows = 300, cols = 17, pad = 2;
        Dense<float> w_ref = testing::random_dense<float>(rows, cols, pad, 5, -1, 1, 6.0f);
        Dense<float> w = w_ref, s_ref(rows, cols, pad, 6.0f), s = s_ref;
        for (size_t r = 0; r < rows; ++r)
            for (size_t c = 0; c < cols; ++c) s.at(r, c) = s_ref.at(r, c) = 0.0f;
        std::vector<uint32_t> clock(rows, 0);
        std::mt19937_64 rng(21);
        const formulas::OptimizerStep p = rule_step(rule);
        const uint32_t steps = 200;
        for (uint32_t t = 1; t <= steps; ++t) {
            StepBatch b = make_step_batch(rows, rng, 10);
            const CsrBatchView x = testing::csr_view(b.data, b.batch);
            backend.catch_up_rows(p, w.view(), &x, s.data.data(), RowClock{clock.data(), t - 1});
            for (uint32_t r : b.rows) ASSERT_EQ(clock[r], t - 1);
            const Dense<float> before = w;
            Dense<float> g =
                testing::random_dense<float>(std::max<size_t>(b.rows.size(), 1), cols, 0, 100 + t);
            std::vector<uint32_t> ids = b.rows;
            ids.resize(std::max<size_t>(ids.size(), 1));
            uint32_t count = uint32_t(b.rows.size());
            const SparseRowGrad grad{ids.data(), &count, g.data.data(), ids.size(), cols};
            backend.optimizer_step_rows(p, w.view(), grad, s.data.data(), nullptr,
                                        SparseUpdate::kExact, RowClock{clock.data(), t});
            backend.optimizer_step_rows(p, w_ref.view(), grad, s_ref.data.data(), nullptr,
                                        SparseUpdate::kExact);
            std::vector<bool> touched(rows, false);
            for (uint32_t r : b.rows) touched[r] = true;
            for (size_t r = 0; r < rows; ++r) {
                if (!touched[r]) {
                    ASSERT_TRUE(same_row(before, w, r)) << what(rule) << " step " << t;
                } else {
                    ASSERT_EQ(clock[r], t);
                }
            }
        }
        backend.catch_up_rows(p, w.view(), nullptr, s.data.data(), RowClock{clock.data(), steps});
        for (uint32_t c : clock) ASSERT_EQ(c, steps);
        double scale = 0;
        const double dw = max_abs_diff(w_ref, w, &scale);
        EXPECT_LE(dw, 3e-5 * scale) << what(rule) << ": weights, scale " << scale;
        const double ds = max_abs_diff(s_ref, s, &scale);
        EXPECT_LE(ds, 3e-5 * scale) << what(rule) << ": velocities, scale " << scale;
        // The padding is never written.
        for (size_t r = 0; r < rows; ++r)
            for (size_t c = cols; c < cols + pad; ++c) ASSERT_EQ(w.at(r, c), 6.0f);
        // A second catch-up at the same step changes nothing.
        const Dense<float> done = w;
        backend.catch_up_rows(p, w.view(), nullptr, s.data.data(), RowClock{clock.data(), steps});
        for (size_t r = 0; r < rows; ++r) ASSERT_TRUE(same_row(done, w, r));
    }
}

TEST(RowCatchUp, BadArgumentsAreInternalErrors) {
    CpuBackend backend(1);
    Dense<float> w(4, 2), s(4, 2), gv(1, 2);
    std::vector<uint32_t> clock(4, 5);
    const formulas::OptimizerStep adam = rule_step({OptimizerKind::kAdam, 0.0f});
    const formulas::OptimizerStep mom = rule_step({OptimizerKind::kMomentum, 0.0f});
    uint32_t row = 1, count = 1;
    const SparseRowGrad grad{&row, &count, gv.data.data(), 1, 2};
    auto expect_internal = [](auto&& f, const char* what) {
        try {
            f();
            ADD_FAILURE() << "expected Error: " << what;
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kInternal) << what;
        }
    };
    expect_internal(
        [&] {
            backend.catch_up_rows(adam, w.view(), nullptr, s.data.data(), {clock.data(), 6});
        },
        "Adam has no closed form");
    expect_internal(
        [&] {
            backend.optimizer_step_rows(mom, w.view(), grad, s.data.data(), nullptr,
                                        SparseUpdate::kLazy, {clock.data(), 6});
        },
        "a clock with lazy updates");
    expect_internal(
        [&] {
            backend.catch_up_rows(mom, w.view(), nullptr, s.data.data(), {clock.data(), 4});
        },
        "a clock ahead of the step");
    Dataset d;
    d.rows = 1;
    d.cols = 4;
    d.offsets = {0, 1};
    d.indices = {7};
    testing::TestBatch b;
    b.size = 1;
    CsrBatchView x = testing::csr_view(d, b);
    expect_internal(
        [&] {
            backend.catch_up_rows(mom, w.view(), &x, s.data.data(), {clock.data(), 6});
        },
        "a row id out of range");
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

// A run on the clock on both devices: catch_up_rows of each batch (duplicates across the
// batch's examples), the clocked step, a final catch-up of every row. Tolerance as the other
// element-wise optimizer ops (1e-5 relative with a 5 % floor), the clocks exactly.
TEST_F(CudaParity, RowCatchUpMomentumAndNesterov) {
    int cases = 0;
    for (OptimizerKind kind : {OptimizerKind::kMomentum, OptimizerKind::kNesterov})
        for (float l2 : {0.0f, 0.01f})
            for (size_t cols : {1, 33, 300}) {
                const uint64_t seed = uint64_t(++cases) * 53;
                const size_t rows = 80;
                formulas::OptimizerStep step;
                step.kind = kind;
                step.learning_rate = 0.05f;
                step.mu = 0.9f;
                step.l2 = l2;
                Dense<float> w = testing::random_dense<float>(rows, cols, 2, seed, -1, 1, kPad);
                Dense<float> s(rows, cols, 2, kPad);
                for (size_t r = 0; r < rows; ++r)
                    for (size_t c = 0; c < cols; ++c) s.at(r, c) = 0.0f;
                DevMat wd(dev(), w), sd(dev(), s);
                std::vector<uint32_t> clock(rows, 0);
                DeviceArray<uint32_t> clock_d = dev_array(dev(), clock, "clock");
                std::mt19937_64 rng(seed);
                const uint32_t steps = 12;
                for (uint32_t t = 1; t <= steps; ++t) {
                    std::vector<uint32_t> ids;
                    for (uint32_t r = 0; r < rows; ++r)
                        if (rng() % 6 == 0) ids.push_back(r);
                    Dataset d;
                    d.rows = 2;
                    d.cols = uint32_t(rows);
                    d.indices = ids;
                    d.offsets = {0, ids.size()};
                    for (uint32_t r : ids)
                        if (rng() % 2 == 0) d.indices.push_back(r);
                    d.offsets.push_back(d.indices.size());
                    testing::TestBatch b;
                    b.size = 2;
                    DevCsr x(dev(), d, b);
                    dev().catch_up_rows(step, wd.view(), &x.view, sd.buf.data(),
                                        {clock_d.data(), t - 1});
                    cpu_.catch_up_rows(step, w.view(), &x.host, s.data.data(),
                                       {clock.data(), t - 1});
                    const size_t capacity = ids.size() + 1;
                    std::vector<uint32_t> rows_h = ids;
                    rows_h.resize(capacity, 0u);
                    std::vector<uint32_t> count_h{uint32_t(ids.size())};
                    const Dense<float> g =
                        testing::random_dense<float>(capacity, cols, 0, seed + t, -0.5, 0.5);
                    std::vector<float> values(g.data.begin(), g.data.begin() + capacity * cols);
                    SparseRowGrad gc{rows_h.data(), count_h.data(), values.data(), capacity, cols};
                    DeviceArray<uint32_t> rows_d = dev_array(dev(), rows_h, "ids");
                    DeviceArray<uint32_t> count_d = dev_array(dev(), count_h, "count");
                    DeviceArray<float> values_d = dev_array(dev(), values, "values");
                    SparseRowGrad gd{rows_d.data(), count_d.data(), values_d.data(), capacity,
                                     cols};
                    dev().optimizer_step_rows(step, wd.view(), gd, sd.buf.data(), nullptr,
                                              SparseUpdate::kExact, {clock_d.data(), t});
                    cpu_.optimizer_step_rows(step, w.view(), gc, s.data.data(), nullptr,
                                             SparseUpdate::kExact, {clock.data(), t});
                }
                dev().catch_up_rows(step, wd.view(), nullptr, sd.buf.data(),
                                    {clock_d.data(), steps});
                cpu_.catch_up_rows(step, w.view(), nullptr, s.data.data(), {clock.data(), steps});
                const std::string what = std::string(to_string(kind)) +
                                         " l2=" + std::to_string(l2) +
                                         " cols=" + std::to_string(cols);
                ASSERT_TRUE(close_dense(w, wd.get(w), 1e-5, 0.05)) << what << " weights";
                ASSERT_TRUE(close_dense(s, sd.get(s), 1e-5, 0.05)) << what << " velocities";
                EXPECT_EQ(fetch(clock_d, rows), clock) << what;
            }
}

}  // namespace
}  // namespace sparsenet::parity
