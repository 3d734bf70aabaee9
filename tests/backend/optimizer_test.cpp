// optimizer_step and optimizer_step_rows: SGD, Momentum and Adam against hand-written multi-step
// references, and the row-sparse update against the dense update with a zero-filled gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "formulas/optimizer.h"

namespace sparsenet {
namespace {

using testing::Dense;

const char* kind_name(OptimizerKind k) {
    return k == OptimizerKind::kSgd ? "SGD" : k == OptimizerKind::kMomentum ? "Momentum" : "Adam";
}

formulas::OptimizerStep make_step(OptimizerKind kind, float l2, int t) {
    formulas::OptimizerStep s;
    s.kind = kind;
    s.learning_rate = 0.05f;
    s.momentum = 0.9f;
    s.beta1 = 0.9f;
    s.beta2 = 0.999f;
    s.epsilon = 1e-8f;
    s.l2 = l2;
    s.bias_correction1 = float(1.0 / (1.0 - std::pow(0.9, t)));
    s.bias_correction2 = float(1.0 / (1.0 - std::pow(0.999, t)));
    return s;
}

// The update rules written out independently of kernels/formulas, in double.
void reference_update(const formulas::OptimizerStep& p, double& w, double g, double& s1,
                      double& s2) {
    const double lr = p.learning_rate;
    g += double(p.l2) * w;
    if (p.kind == OptimizerKind::kSgd) {
        w = w - lr * g;
    } else if (p.kind == OptimizerKind::kMomentum) {
        s1 = double(p.momentum) * s1 - lr * g;
        w = w + s1;
    } else {
        s1 = double(p.beta1) * s1 + (1.0 - double(p.beta1)) * g;
        s2 = double(p.beta2) * s2 + (1.0 - double(p.beta2)) * g * g;
        const double m_hat = s1 * double(p.bias_correction1);
        const double v_hat = s2 * double(p.bias_correction2);
        w = w - lr * m_hat / (std::sqrt(v_hat) + double(p.epsilon));
    }
}

TEST(OptimizerStep, SgdByHand) {
    CpuBackend backend(1);
    Dense<float> w(1, 2), g(1, 2);
    w.at(0, 0) = 1.0f;
    w.at(0, 1) = -2.0f;
    g.at(0, 0) = 0.5f;
    g.at(0, 1) = 0.25f;
    formulas::OptimizerStep s;
    s.kind = OptimizerKind::kSgd;
    s.learning_rate = 0.5f;
    backend.optimizer_step(s, w.view(), g.cview(), nullptr, nullptr);
    EXPECT_EQ(w.at(0, 0), 0.75f);
    EXPECT_EQ(w.at(0, 1), -2.125f);
    s.l2 = 0.5f;  // g' = g + 0.5 w
    backend.optimizer_step(s, w.view(), g.cview(), nullptr, nullptr);
    EXPECT_FLOAT_EQ(w.at(0, 0), 0.75f - 0.5f * (0.5f + 0.375f));
    EXPECT_FLOAT_EQ(w.at(0, 1), -2.125f - 0.5f * (0.25f - 1.0625f));
}

TEST(OptimizerStep, MultiStepMatchesReference) {
    CpuBackend backend(2);
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam})
        for (float l2 : {0.0f, 0.01f})
            for (auto [rows, cols] :
                 {std::pair<size_t, size_t>{1, 1}, {7, 5}, {64, 130}, {300, 257}}) {
                const size_t pad = 3;
                Dense<float> w = testing::random_dense<float>(rows, cols, pad, 1, -1, 1, 8.0f);
                Dense<float> s1(rows, cols, pad, 0.0f), s2(rows, cols, pad, 0.0f);
                Dense<double> wr(rows, cols), s1r(rows, cols), s2r(rows, cols);
                for (size_t r = 0; r < rows; ++r)
                    for (size_t c = 0; c < cols; ++c) wr.at(r, c) = w.at(r, c);
                for (int t = 1; t <= 4; ++t) {
                    const formulas::OptimizerStep step = make_step(kind, l2, t);
                    const Dense<float> g = testing::random_dense<float>(rows, cols, 1, 10 + t);
                    backend.optimizer_step(step, w.view(), g.cview(),
                                           kind == OptimizerKind::kSgd ? nullptr : s1.data.data(),
                                           kind == OptimizerKind::kAdam ? s2.data.data() : nullptr);
                    for (size_t r = 0; r < rows; ++r)
                        for (size_t c = 0; c < cols; ++c)
                            reference_update(step, wr.at(r, c), g.at(r, c), s1r.at(r, c),
                                             s2r.at(r, c));
                }
                for (size_t r = 0; r < rows; ++r) {
                    for (size_t c = 0; c < cols; ++c) {
                        ASSERT_NEAR(w.at(r, c), wr.at(r, c), 1e-5)
                            << kind_name(kind) << " l2=" << l2 << " at " << r << "," << c;
                        if (kind != OptimizerKind::kSgd) {
                            ASSERT_NEAR(s1.at(r, c), s1r.at(r, c), 1e-5);
                        }
                        if (kind == OptimizerKind::kAdam) {
                            ASSERT_NEAR(s2.at(r, c), s2r.at(r, c), 1e-6);
                        }
                    }
                    for (size_t c = cols; c < w.ld; ++c) {
                        ASSERT_EQ(w.at(r, c), 8.0f);
                        ASSERT_EQ(s1.at(r, c), 0.0f);
                    }
                }
            }
}

TEST(OptimizerStep, MissingStateSlotIsAnInternalError) {
    CpuBackend backend(1);
    Dense<float> w(2, 2), g(2, 2), s(2, 2);
    for (OptimizerKind kind : {OptimizerKind::kMomentum, OptimizerKind::kAdam}) {
        try {
            backend.optimizer_step(make_step(kind, 0, 1), w.view(), g.cview(),
                                   kind == OptimizerKind::kAdam ? s.data.data() : nullptr, nullptr);
            FAIL() << "expected Error";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kInternal);
        }
    }
}

// optimizer_step_rows must equal optimizer_step with the gradient zero outside grad.rows, for
// several steps (state carried), every kind, with and without L2.
TEST(OptimizerStepRows, EqualsDenseStepWithZeroFilledGradient) {
    CpuBackend backend(2);
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam})
        for (float l2 : {0.0f, 0.01f})
            for (auto [rows, cols] :
                 {std::pair<size_t, size_t>{1, 1}, {7, 5}, {64, 130}, {500, 64}}) {
                const size_t pad = 2;
                Dense<float> w_rows = testing::random_dense<float>(rows, cols, pad, 3, -1, 1, 6.0f);
                Dense<float> w_dense = w_rows;
                Dense<float> s1_rows(rows, cols, pad), s2_rows(rows, cols, pad);
                Dense<float> s1_dense(rows, cols, pad), s2_dense(rows, cols, pad);
                const Dense<float> w_start = w_rows;
                std::mt19937_64 rng(rows * 31 + cols);
                for (int t = 1; t <= 3; ++t) {
                    // A random sorted subset of the rows (possibly empty) carries the gradient.
                    std::vector<uint32_t> touched;
                    for (uint32_t r = 0; r < rows; ++r)
                        if (rng() % 3 == 0) touched.push_back(r);
                    const Dense<float> gv = testing::random_dense<float>(
                        std::max<size_t>(touched.size(), 1), cols, 0, 100 + t);
                    Dense<float> g_dense(rows, cols, 1, 0.0f);
                    for (size_t i = 0; i < touched.size(); ++i)
                        for (size_t c = 0; c < cols; ++c) g_dense.at(touched[i], c) = gv.at(i, c);
                    std::vector<uint32_t> grad_rows = touched;
                    grad_rows.resize(std::max<size_t>(touched.size(), 1));
                    uint32_t count = uint32_t(touched.size());
                    SparseRowGrad grad{grad_rows.data(), &count, const_cast<float*>(gv.data.data()),
                                       grad_rows.size(), cols};

                    const formulas::OptimizerStep step = make_step(kind, l2, t);
                    float* s1r = kind == OptimizerKind::kSgd ? nullptr : s1_rows.data.data();
                    float* s2r = kind == OptimizerKind::kAdam ? s2_rows.data.data() : nullptr;
                    float* s1d = kind == OptimizerKind::kSgd ? nullptr : s1_dense.data.data();
                    float* s2d = kind == OptimizerKind::kAdam ? s2_dense.data.data() : nullptr;
                    backend.optimizer_step_rows(step, w_rows.view(), grad, s1r, s2r);
                    backend.optimizer_step(step, w_dense.view(), g_dense.cview(), s1d, s2d);
                    const std::string what =
                        std::string(kind_name(kind)) + " l2=" + std::to_string(l2) +
                        " rows=" + std::to_string(rows) + " step " + std::to_string(t);
                    ASSERT_EQ(0, std::memcmp(w_rows.data.data(), w_dense.data.data(),
                                             w_rows.data.size() * 4))
                        << what;
                    ASSERT_EQ(0, std::memcmp(s1_rows.data.data(), s1_dense.data.data(),
                                             s1_rows.data.size() * 4))
                        << what;
                    ASSERT_EQ(0, std::memcmp(s2_rows.data.data(), s2_dense.data.data(),
                                             s2_rows.data.size() * 4))
                        << what;
                }
                if (kind == OptimizerKind::kSgd && l2 == 0.0f && rows == 500) {
                    // Rows never touched are bit-identical to the start.
                    size_t unchanged = 0;
                    for (size_t r = 0; r < rows; ++r)
                        unchanged +=
                            std::memcmp(&w_rows.at(r, 0), &w_start.at(r, 0), cols * 4) == 0;
                    EXPECT_GT(unchanged, 0u);
                }
            }
}

TEST(OptimizerStepRows, BadRowIdIsAnInternalError) {
    CpuBackend backend(1);
    Dense<float> w(3, 2), gv(1, 2);
    uint32_t row = 3, count = 1;
    SparseRowGrad grad{&row, &count, gv.data.data(), 1, 2};
    try {
        backend.optimizer_step_rows(make_step(OptimizerKind::kSgd, 0, 1), w.view(), grad, nullptr,
                                    nullptr);
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInternal);
    }
}

TEST(OptimizerDouble, AdamMatchesReferenceTightly) {
    Dense<double> w = testing::random_dense<double>(4, 6, 1, 9), s1(4, 6, 1), s2(4, 6, 1);
    Dense<double> wr = w, s1r(4, 6, 1), s2r(4, 6, 1);
    for (int t = 1; t <= 3; ++t) {
        const formulas::OptimizerStep step = make_step(OptimizerKind::kAdam, 0.01f, t);
        const Dense<double> g = testing::random_dense<double>(4, 6, 1, 20 + t);
        cpu::optimizer_step(step, w.mat(), g.cmat(), s1.data.data(), s2.data.data(), 2);
        for (size_t r = 0; r < 4; ++r)
            for (size_t c = 0; c < 6; ++c)
                reference_update(step, wr.at(r, c), g.at(r, c), s1r.at(r, c), s2r.at(r, c));
    }
    for (size_t r = 0; r < 4; ++r)
        for (size_t c = 0; c < 6; ++c) EXPECT_NEAR(w.at(r, c), wr.at(r, c), 1e-12);
}

}  // namespace
}  // namespace sparsenet
