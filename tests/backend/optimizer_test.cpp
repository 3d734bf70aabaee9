// optimizer_step and optimizer_step_rows for every optimizer: multi-step runs against an
// independent double-precision reference written in DSSTNE's kernel form (negative gradient,
// regulariser subtracted), the row-sparse update against the dense update with a zero-filled
// gradient (exact mode) and against touched-rows-only updates (lazy mode). Hand-computed
// two-step values are in optimizer_rules_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/optimizer.h"

namespace sparsenet {
namespace {

using testing::Dense;

constexpr OptimizerKind kAllKinds[] = {OptimizerKind::kSgd,      OptimizerKind::kMomentum,
                                       OptimizerKind::kNesterov, OptimizerKind::kAdaGrad,
                                       OptimizerKind::kRmsProp,  OptimizerKind::kAdaDelta,
                                       OptimizerKind::kAdam,     OptimizerKind::kAdamW};

struct Reg {
    float l2, l1;
};
constexpr Reg kRegs[] = {{0.0f, 0.0f}, {0.01f, 0.0f}, {0.0f, 0.003f}, {0.02f, 0.004f}};

formulas::OptimizerStep make_step(OptimizerKind kind, Reg reg, int t) {
    formulas::OptimizerStep s;
    s.kind = kind;
    s.learning_rate = 0.05f;
    s.mu = 0.9f;
    s.mu1 = 0.999f;
    s.epsilon = default_epsilon(kind);
    s.l2 = reg.l2;
    s.l1 = reg.l1;
    s.bias_correction1 = float(1.0 / (1.0 - std::pow(double(0.9f), t)));
    s.bias_correction2 = float(1.0 / (1.0 - std::pow(double(0.999f), t)));
    return s;
}

float* slot(Dense<float>& s, OptimizerKind kind, int index) {
    return optimizer_state_slots(kind) > index ? s.data.data() : nullptr;
}

double sgn(double x) {
    return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
}

// The rules as DSSTNE's kernels write them (kernels.cu: g is the negative gradient and the
// regulariser is subtracted from it), in double; Adam without DSSTNE's storing of the
// bias-corrected moments, AdamW after Loshchilov & Hutter. t is the 1-based step.
void reference_update(const formulas::OptimizerStep& p, int t, double& w, double grad, double& s1,
                      double& s2) {
    const double alpha = p.learning_rate, mu = p.mu, mu1 = p.mu1, eps = p.epsilon;
    const double reg = double(p.l2) * w + double(p.l1) * sgn(w);
    const double g = -grad;  // DSSTNE's sign
    switch (p.kind) {
        case OptimizerKind::kSgd:
            w = w + alpha * (g - reg);
            break;
        case OptimizerKind::kMomentum:
            s1 = mu * s1 + alpha * (g - reg);
            w = w + s1;
            break;
        case OptimizerKind::kNesterov: {
            const double v_old = s1;
            s1 = mu * v_old + alpha * (g - reg);
            w = w + s1 + mu * (s1 - v_old);
            break;
        }
        case OptimizerKind::kAdaGrad: {
            const double gg = g - reg;
            s1 += gg * gg;
            w = w + alpha * gg / std::sqrt(std::max(1e-9, s1));
            break;
        }
        case OptimizerKind::kRmsProp: {
            const double gg = g - reg;
            s1 = mu * s1 + (1 - mu) * gg * gg;
            w = w + alpha * gg / std::sqrt(std::max(1e-9, s1));
            break;
        }
        case OptimizerKind::kAdaDelta: {
            const double gg = g - reg;
            s2 = mu * s2 + (1 - mu) * gg * gg;  // E[g^2]
            const double dw = std::sqrt(std::max(1e-9, s1) / std::max(1e-9, s2)) * gg;
            s1 = mu * s1 + (1 - mu) * dw * dw;  // E[dw^2]
            w = w + dw;
            break;
        }
        case OptimizerKind::kAdam:
        case OptimizerKind::kAdamW: {
            const bool decoupled = p.kind == OptimizerKind::kAdamW;
            const double gg = decoupled ? g : g - reg;
            s1 = mu * s1 + (1 - mu) * gg;
            s2 = mu1 * s2 + (1 - mu1) * gg * gg;
            const double m_hat = s1 / (1 - std::pow(mu, t));
            const double v_hat = s2 / (1 - std::pow(mu1, t));
            w = w + alpha * m_hat / (std::sqrt(v_hat) + eps) - (decoupled ? alpha * reg : 0.0);
            break;
        }
    }
}

// The moments keep the reference's sign convention (DSSTNE's velocity of the negative
// gradient): Momentum/Nesterov velocities are equal, Adam's m is negated.
double state1_as_ours(OptimizerKind kind, double s1) {
    return kind == OptimizerKind::kAdam || kind == OptimizerKind::kAdamW ? -s1 : s1;
}

std::string what(OptimizerKind kind, Reg reg) {
    return std::string(to_string(kind)) + " l2=" + std::to_string(reg.l2) +
           " l1=" + std::to_string(reg.l1);
}

TEST(OptimizerStep, MultiStepMatchesDsstneFormReference) {
    CpuBackend backend(2);
    for (OptimizerKind kind : kAllKinds)
        for (Reg reg : kRegs)
            for (auto [rows, cols] :
                 {std::pair<size_t, size_t>{1, 1}, {7, 5}, {64, 130}, {300, 257}}) {
                const size_t pad = 3;
                Dense<float> w = testing::random_dense<float>(rows, cols, pad, 1, -1, 1, 8.0f);
                Dense<float> s1(rows, cols, pad, 0.0f), s2(rows, cols, pad, 0.0f);
                Dense<double> wr(rows, cols), s1r(rows, cols), s2r(rows, cols);
                for (size_t r = 0; r < rows; ++r)
                    for (size_t c = 0; c < cols; ++c) wr.at(r, c) = w.at(r, c);
                for (int t = 1; t <= 4; ++t) {
                    const formulas::OptimizerStep step = make_step(kind, reg, t);
                    const Dense<float> g = testing::random_dense<float>(rows, cols, 1, 10 + t);
                    backend.optimizer_step(step, w.view(), g.cview(), slot(s1, kind, 0),
                                           slot(s2, kind, 1));
                    for (size_t r = 0; r < rows; ++r)
                        for (size_t c = 0; c < cols; ++c)
                            reference_update(step, t, wr.at(r, c), g.at(r, c), s1r.at(r, c),
                                             s2r.at(r, c));
                }
                for (size_t r = 0; r < rows; ++r) {
                    for (size_t c = 0; c < cols; ++c) {
                        ASSERT_NEAR(w.at(r, c), wr.at(r, c), 2e-5)
                            << what(kind, reg) << " at " << r << "," << c;
                        if (optimizer_state_slots(kind) > 0) {
                            ASSERT_NEAR(s1.at(r, c), state1_as_ours(kind, s1r.at(r, c)), 2e-5)
                                << what(kind, reg);
                        }
                        if (optimizer_state_slots(kind) > 1) {
                            ASSERT_NEAR(s2.at(r, c), s2r.at(r, c), 1e-6) << what(kind, reg);
                        }
                    }
                    for (size_t c = cols; c < w.ld; ++c) {
                        ASSERT_EQ(w.at(r, c), 8.0f);
                        ASSERT_EQ(s1.at(r, c), 0.0f);
                        ASSERT_EQ(s2.at(r, c), 0.0f);
                    }
                }
            }
}

TEST(OptimizerStep, MissingStateSlotIsAnInternalError) {
    CpuBackend backend(1);
    Dense<float> w(2, 2), g(2, 2), s(2, 2);
    for (OptimizerKind kind : kAllKinds) {
        const int slots = optimizer_state_slots(kind);
        if (slots == 0) continue;
        try {
            // One slot fewer than the kind needs.
            backend.optimizer_step(make_step(kind, {}, 1), w.view(), g.cview(),
                                   slots == 2 ? s.data.data() : nullptr, nullptr);
            FAIL() << "expected Error for " << to_string(kind);
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kInternal);
        }
    }
}

// A random sorted subset of the rows (possibly empty) and its gradient rows.
struct RowSubset {
    std::vector<uint32_t> rows;
    Dense<float> values;
    std::vector<uint32_t> grad_rows;
    uint32_t count = 0;
    SparseRowGrad grad() {
        return {grad_rows.data(), &count, values.data.data(), grad_rows.size(), values.cols};
    }
};

RowSubset random_subset(size_t rows, size_t cols, std::mt19937_64& rng, uint64_t seed) {
    RowSubset s;
    for (uint32_t r = 0; r < rows; ++r)
        if (rng() % 3 == 0) s.rows.push_back(r);
    s.values = testing::random_dense<float>(std::max<size_t>(s.rows.size(), 1), cols, 0, seed);
    s.grad_rows = s.rows;
    s.grad_rows.resize(std::max<size_t>(s.rows.size(), 1));
    s.count = uint32_t(s.rows.size());
    return s;
}

bool same_bits(const Dense<float>& a, const Dense<float>& b) {
    return std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
}

// Exact mode must equal optimizer_step with the gradient zero outside grad.rows, bit for bit,
// for several steps (state carried), every kind, with and without regularisation.
TEST(OptimizerStepRows, ExactEqualsDenseStepWithZeroFilledGradient) {
    CpuBackend backend(2);
    for (OptimizerKind kind : kAllKinds)
        for (Reg reg : kRegs)
            for (auto [rows, cols] :
                 {std::pair<size_t, size_t>{1, 1}, {7, 5}, {64, 130}, {500, 64}}) {
                const size_t pad = 2;
                Dense<float> w_rows = testing::random_dense<float>(rows, cols, pad, 3, -1, 1, 6.0f);
                Dense<float> w_dense = w_rows;
                const Dense<float> w_start = w_rows;
                Dense<float> s1_rows(rows, cols, pad), s2_rows(rows, cols, pad);
                Dense<float> s1_dense(rows, cols, pad), s2_dense(rows, cols, pad);
                std::mt19937_64 rng(rows * 31 + cols);
                std::vector<bool> ever_touched(rows, false);
                for (int t = 1; t <= 3; ++t) {
                    RowSubset sub = random_subset(rows, cols, rng, 100 + t);
                    for (uint32_t r : sub.rows) ever_touched[r] = true;
                    Dense<float> g_dense(rows, cols, 1, 0.0f);
                    for (size_t i = 0; i < sub.rows.size(); ++i)
                        for (size_t c = 0; c < cols; ++c)
                            g_dense.at(sub.rows[i], c) = sub.values.at(i, c);
                    const formulas::OptimizerStep step = make_step(kind, reg, t);
                    backend.optimizer_step_rows(step, w_rows.view(), sub.grad(),
                                                slot(s1_rows, kind, 0), slot(s2_rows, kind, 1),
                                                SparseUpdate::kExact);
                    backend.optimizer_step(step, w_dense.view(), g_dense.cview(),
                                           slot(s1_dense, kind, 0), slot(s2_dense, kind, 1));
                    const std::string msg = what(kind, reg) + " rows=" + std::to_string(rows) +
                                            " step " + std::to_string(t);
                    ASSERT_TRUE(same_bits(w_rows, w_dense)) << msg;
                    ASSERT_TRUE(same_bits(s1_rows, s1_dense)) << msg;
                    ASSERT_TRUE(same_bits(s2_rows, s2_dense)) << msg;
                }
                // Where a zero gradient is a no-op, rows never touched keep their start bits.
                if (formulas::zero_gradient_is_noop(make_step(kind, reg, 1))) {
                    for (size_t r = 0; r < rows; ++r) {
                        if (!ever_touched[r]) {
                            ASSERT_EQ(0, std::memcmp(&w_rows.at(r, 0), &w_start.at(r, 0),
                                                     cols * sizeof(float)))
                                << what(kind, reg) << " row " << r;
                        }
                    }
                }
            }
}

// Lazy mode: touched rows get the dense update of their own gradient row; untouched rows and
// their state keep their bits.
TEST(OptimizerStepRows, LazyUpdatesTouchedRowsOnly) {
    CpuBackend backend(2);
    for (OptimizerKind kind : kAllKinds)
        for (Reg reg : kRegs) {
            const size_t rows = 200, cols = 33, pad = 1;
            Dense<float> w = testing::random_dense<float>(rows, cols, pad, 5, -1, 1, 6.0f);
            Dense<float> s1(rows, cols, pad), s2(rows, cols, pad);
            std::mt19937_64 rng(77);
            for (int t = 1; t <= 3; ++t) {
                RowSubset sub = random_subset(rows, cols, rng, 200 + t);
                const formulas::OptimizerStep step = make_step(kind, reg, t);
                // Expected: every touched row updated alone by the dense op (a 1-row matrix).
                Dense<float> w_exp = w, s1_exp = s1, s2_exp = s2;
                for (size_t i = 0; i < sub.rows.size(); ++i) {
                    const size_t r = sub.rows[i];
                    MatrixView wr{&w_exp.at(r, 0), 1, cols, w.ld};
                    ConstMatrixView gr(&sub.values.at(i, 0), 1, cols, cols);
                    backend.optimizer_step(
                        step, wr, gr, optimizer_state_slots(kind) > 0 ? &s1_exp.at(r, 0) : nullptr,
                        optimizer_state_slots(kind) > 1 ? &s2_exp.at(r, 0) : nullptr);
                }
                backend.optimizer_step_rows(step, w.view(), sub.grad(), slot(s1, kind, 0),
                                            slot(s2, kind, 1), SparseUpdate::kLazy);
                ASSERT_TRUE(same_bits(w, w_exp)) << what(kind, reg) << " step " << t;
                ASSERT_TRUE(same_bits(s1, s1_exp)) << what(kind, reg) << " step " << t;
                ASSERT_TRUE(same_bits(s2, s2_exp)) << what(kind, reg) << " step " << t;
            }
        }
}

TEST(OptimizerStepRows, BadRowIdIsAnInternalError) {
    CpuBackend backend(1);
    Dense<float> w(3, 2), gv(1, 2);
    uint32_t row = 3, count = 1;
    SparseRowGrad grad{&row, &count, gv.data.data(), 1, 2};
    for (SparseUpdate mode : {SparseUpdate::kExact, SparseUpdate::kLazy}) {
        try {
            backend.optimizer_step_rows(make_step(OptimizerKind::kSgd, {}, 1), w.view(), grad,
                                        nullptr, nullptr, mode);
            FAIL() << "expected Error";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kInternal);
        }
    }
}

TEST(OptimizerDouble, EveryKindMatchesReferenceTightly) {
    for (OptimizerKind kind : kAllKinds) {
        Dense<double> w = testing::random_dense<double>(4, 6, 1, 9), s1(4, 6, 1), s2(4, 6, 1);
        Dense<double> wr = w, s1r(4, 6, 1), s2r(4, 6, 1);
        for (int t = 1; t <= 3; ++t) {
            formulas::OptimizerStep step = make_step(kind, {0.01f, 0.002f}, t);
            const Dense<double> g = testing::random_dense<double>(4, 6, 1, 20 + t);
            cpu::optimizer_step(step, w.mat(), g.cmat(), s1.data.data(), s2.data.data(), 2);
            for (size_t r = 0; r < 4; ++r)
                for (size_t c = 0; c < 6; ++c)
                    reference_update(step, t, wr.at(r, c), g.at(r, c), s1r.at(r, c), s2r.at(r, c));
        }
        // The step's float bias corrections differ from the reference's exact ones in the 8th
        // digit; everything else is double.
        for (size_t r = 0; r < 4; ++r)
            for (size_t c = 0; c < 6; ++c)
                EXPECT_NEAR(w.at(r, c), wr.at(r, c), 1e-8) << to_string(kind);
    }
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

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

}  // namespace
}  // namespace sparsenet::parity
