// Every optimizer's update, two steps, against values worked out by hand from the rules in
// docs/config-reference.md ("Optimizers"). Each expected value is written as the arithmetic of
// the rule in double (and, where short, as the number it comes to), never taken from the code
// under test. One weight w = 0.5 sees g1 = 0.2 then g2 = -0.1, with alpha = 0.1, mu = 0.9,
// mu1 = 0.999 unless a test says otherwise.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "formulas/optimizer.h"

namespace sparsenet {
namespace {

struct Param {
    float w = 0.5f, s1 = 0.0f, s2 = 0.0f;
};

formulas::OptimizerStep step_of(OptimizerKind kind, int t, float l2 = 0.0f, float l1 = 0.0f,
                                float alpha = 0.1f) {
    formulas::OptimizerStep s;
    s.kind = kind;
    s.learning_rate = alpha;
    s.mu = 0.9f;
    s.mu1 = 0.999f;
    s.epsilon = default_epsilon(kind);
    s.l2 = l2;
    s.l1 = l1;
    s.bias_correction1 = float(1.0 / (1.0 - std::pow(double(0.9f), t)));
    s.bias_correction2 = float(1.0 / (1.0 - std::pow(double(0.999f), t)));
    return s;
}

// One step through the backend op (a 1x1 matrix), returning the new weight.
float apply(CpuBackend& backend, const formulas::OptimizerStep& step, Param& run, float g) {
    MatrixView w{&run.w, 1, 1, 1};
    ConstMatrixView gv(&g, 1, 1, 1);
    backend.optimizer_step(step, w, gv, &run.s1, &run.s2);
    return run.w;
}

struct TwoSteps {
    float w1, w2;
};

TwoSteps two_steps(OptimizerKind kind, float l2 = 0.0f, float l1 = 0.0f, float w0 = 0.5f) {
    CpuBackend backend(1);
    Param run;
    run.w = w0;
    TwoSteps r;
    r.w1 = apply(backend, step_of(kind, 1, l2, l1), run, 0.2f);
    r.w2 = apply(backend, step_of(kind, 2, l2, l1), run, -0.1f);
    return r;
}

// The hyper-parameters as the op receives them (floats): 0.999f is 0.999 + 4.7e-8, which moves
// Adam's results by about 1e-6, more than the tolerances below.
const double kAlpha = double(0.1f), kMu = double(0.9f), kMu1 = double(0.999f);

TEST(OptimizerRules, Sgd) {
    const TwoSteps got = two_steps(OptimizerKind::kSgd);
    const double w1 = 0.5 - kAlpha * 0.2;  // 0.48
    const double w2 = w1 - kAlpha * -0.1;  // 0.49
    EXPECT_NEAR(got.w1, 0.48, 1e-7);
    EXPECT_NEAR(got.w1, w1, 1e-7);
    EXPECT_NEAR(got.w2, 0.49, 1e-7);
    EXPECT_NEAR(got.w2, w2, 1e-7);
}

TEST(OptimizerRules, Momentum) {
    const TwoSteps got = two_steps(OptimizerKind::kMomentum);
    const double v1 = kMu * 0 - kAlpha * 0.2;    // -0.02
    const double w1 = 0.5 + v1;                  // 0.48
    const double v2 = kMu * v1 - kAlpha * -0.1;  // -0.018 + 0.01 = -0.008
    const double w2 = w1 + v2;                   // 0.472
    EXPECT_NEAR(got.w1, w1, 1e-7);
    EXPECT_NEAR(got.w2, w2, 1e-7);
    EXPECT_NEAR(got.w2, 0.472, 1e-7);
}

TEST(OptimizerRules, Nesterov) {
    const TwoSteps got = two_steps(OptimizerKind::kNesterov);
    const double v1 = kMu * 0 - kAlpha * 0.2;     // -0.02
    const double w1 = 0.5 + v1 + kMu * (v1 - 0);  // 0.5 - 0.02 - 0.018 = 0.462
    const double v2 = kMu * v1 - kAlpha * -0.1;   // -0.008
    const double w2 = w1 + v2 + kMu * (v2 - v1);  // 0.462 - 0.008 + 0.0108 = 0.4648
    EXPECT_NEAR(got.w1, 0.462, 1e-7);
    EXPECT_NEAR(got.w1, w1, 1e-7);
    EXPECT_NEAR(got.w2, 0.4648, 1e-7);
    EXPECT_NEAR(got.w2, w2, 1e-7);
}

TEST(OptimizerRules, AdaGrad) {
    const TwoSteps got = two_steps(OptimizerKind::kAdaGrad);
    const double v1 = 0.2 * 0.2;                           // 0.04
    const double w1 = 0.5 - kAlpha * 0.2 / std::sqrt(v1);  // 0.4
    const double v2 = v1 + 0.1 * 0.1;                      // 0.05
    const double w2 = w1 - kAlpha * -0.1 / std::sqrt(v2);  // 0.4 + 0.01 / 0.2236068 = 0.4447214
    EXPECT_NEAR(got.w1, w1, 2e-7);
    EXPECT_NEAR(got.w1, 0.4, 3e-6);
    EXPECT_NEAR(got.w2, w2, 2e-7);
    EXPECT_NEAR(got.w2, 0.4447214, 2e-7);
}

TEST(OptimizerRules, RmsProp) {
    const TwoSteps got = two_steps(OptimizerKind::kRmsProp);
    const double v1 = (1 - kMu) * 0.04;                    // 0.004
    const double w1 = 0.5 - kAlpha * 0.2 / std::sqrt(v1);  // 0.5 - 0.3162278 = 0.1837722
    const double v2 = kMu * v1 + (1 - kMu) * 0.01;         // 0.0046
    const double w2 = w1 - kAlpha * -0.1 / std::sqrt(v2);  // 0.1837722 + 0.1474420 = 0.3312142
    EXPECT_NEAR(got.w1, w1, 2e-7);
    EXPECT_NEAR(got.w1, 0.1837722, 2e-7);
    EXPECT_NEAR(got.w2, w2, 2e-7);
    EXPECT_NEAR(got.w2, 0.3312142, 2e-7);
}

TEST(OptimizerRules, AdaDelta) {
    // alpha is not used (as DSSTNE); eps = 1e-9 floors both averages.
    const TwoSteps got = two_steps(OptimizerKind::kAdaDelta);
    const double eps = 1e-9;
    double eg = (1 - kMu) * 0.04;                                        // E[g^2] = 0.004
    double d = std::sqrt(std::max(0.0, eps) / std::max(eg, eps)) * 0.2;  // 5e-4 * 0.2 = 1e-4
    double edx = (1 - kMu) * d * d;                                      // E[dx^2] = 1e-9
    const double w1 = 0.5 - d;                                           // 0.4999
    eg = kMu * eg + (1 - kMu) * 0.01;                                    // 0.0046
    d = std::sqrt(std::max(edx, eps) / std::max(eg, eps)) * -0.1;        // -4.662524e-5
    const double w2 = w1 - d;                                            // 0.4999466
    // Compare the steps (the weight's float ulp near 0.5 is 6e-8).
    EXPECT_NEAR(0.5 - double(got.w1), 1e-4, 1e-7);
    EXPECT_NEAR(double(got.w2) - double(got.w1), w2 - w1, 1e-7);
    EXPECT_NEAR(double(got.w2) - double(got.w1), 4.662524e-5, 1e-7);
}

TEST(OptimizerRules, Adam) {
    const TwoSteps got = two_steps(OptimizerKind::kAdam);
    const double eps = 1e-8;
    double m = (1 - kMu) * 0.2;                                         // 0.02
    double v = (1 - kMu1) * 0.04;                                       // 4e-5
    double m_hat = m / (1 - kMu), v_hat = v / (1 - kMu1);               // 0.2, 0.04
    const double w1 = 0.5 - kAlpha * m_hat / (std::sqrt(v_hat) + eps);  // 0.4
    m = kMu * m + (1 - kMu) * -0.1;                                     // 0.008
    v = kMu1 * v + (1 - kMu1) * 0.01;                                   // 4.996e-5
    m_hat = m / (1 - kMu * kMu);                                        // 0.0421053
    v_hat = v / (1 - kMu1 * kMu1);                                      // 0.0249925
    const double w2 = w1 - kAlpha * m_hat / (std::sqrt(v_hat) + eps);   // 0.3733663
    EXPECT_NEAR(got.w1, w1, 2e-7);
    EXPECT_NEAR(got.w1, 0.4, 3e-6);
    EXPECT_NEAR(got.w2, w2, 2e-7);
    EXPECT_NEAR(got.w2, 0.3733663, 3e-6);  // with 0.999 exactly
}

TEST(OptimizerRules, L2AndL1AddToTheGradient) {
    // SGD, lambda = 0.01, lambda1 = 0.001: g' = g + lambda w + lambda1 sign(w).
    const double l2 = 0.01, l1 = 0.001;
    {
        const TwoSteps got = two_steps(OptimizerKind::kSgd, float(l2), float(l1));
        const double w1 = 0.5 - kAlpha * (0.2 + l2 * 0.5 + l1);  // 0.5 - 0.0206 = 0.4794
        const double w2 = w1 - kAlpha * (-0.1 + l2 * w1 + l1);   // 0.4794 + 0.0094206
        EXPECT_NEAR(got.w1, 0.4794, 1e-7);
        EXPECT_NEAR(got.w2, w2, 1e-7);
        EXPECT_NEAR(got.w2, 0.4888206, 1e-7);
    }
    {
        // A negative weight: sign(w) = -1 pulls it up.
        const TwoSteps got = two_steps(OptimizerKind::kSgd, float(l2), float(l1), -0.3f);
        const double w1 = -0.3 - kAlpha * (0.2 + l2 * -0.3 - l1);  // -0.3 - 0.0196 = -0.3196
        const double w2 = w1 - kAlpha * (-0.1 + l2 * w1 - l1);     // -0.3196 + 0.0104196
        EXPECT_NEAR(got.w1, w1, 1e-7);
        EXPECT_NEAR(got.w2, w2, 1e-7);
        EXPECT_NEAR(got.w2, -0.3091804, 1e-7);
    }
    {
        // L1 only, at w = 0: sign(0) = 0, so a zero gradient leaves the weight at 0.
        CpuBackend backend(1);
        Param run;
        run.w = 0.0f;
        EXPECT_EQ(apply(backend, step_of(OptimizerKind::kSgd, 1, 0.0f, 0.5f), run, 0.0f), 0.0f);
    }
    {
        // Momentum with L2: the regulariser enters the velocity.
        const TwoSteps got = two_steps(OptimizerKind::kMomentum, float(l2));
        const double v1 = -kAlpha * (0.2 + l2 * 0.5);            // -0.0205
        const double w1 = 0.5 + v1;                              // 0.4795
        const double v2 = kMu * v1 - kAlpha * (-0.1 + l2 * w1);  // -0.01845 + 0.009520500
        const double w2 = w1 + v2;
        EXPECT_NEAR(got.w1, 0.4795, 1e-7);
        EXPECT_NEAR(got.w2, w2, 1e-7);
        EXPECT_NEAR(got.w2, 0.4705705, 1e-7);
    }
    {
        // Adam with L2: the regulariser goes through the moments (coupled), unlike AdamW.
        const TwoSteps got = two_steps(OptimizerKind::kAdam, float(l2));
        const double g1 = 0.2 + l2 * 0.5;  // 0.205
        double m = (1 - kMu) * g1, v = (1 - kMu1) * g1 * g1;
        const double w1 = 0.5 - kAlpha * (m / (1 - kMu)) / (std::sqrt(v / (1 - kMu1)) + 1e-8);
        const double g2 = -0.1 + l2 * w1;
        m = kMu * m + (1 - kMu) * g2;
        v = kMu1 * v + (1 - kMu1) * g2 * g2;
        const double w2 =
            w1 - kAlpha * (m / (1 - kMu * kMu)) / (std::sqrt(v / (1 - kMu1 * kMu1)) + 1e-8);
        EXPECT_NEAR(got.w1, w1, 2e-7);
        EXPECT_NEAR(got.w2, w2, 2e-7);
    }
}

TEST(OptimizerRules, AdamWDecouplesTheRegulariser) {
    const double l2 = 0.01, l1 = 0.002;
    const TwoSteps got = two_steps(OptimizerKind::kAdamW, float(l2), float(l1));
    // The moments see the raw gradients, exactly as in the Adam test: steps 1.0 then 0.2663370.
    const double eps = 1e-8;
    double m = (1 - kMu) * 0.2, v = (1 - kMu1) * 0.04;
    const double a1 = (m / (1 - kMu)) / (std::sqrt(v / (1 - kMu1)) + eps);  // 1.0
    const double w1 = 0.5 - kAlpha * (a1 + l2 * 0.5 + l1);  // 0.5 - 0.1 * 1.007 = 0.3993
    m = kMu * m + (1 - kMu) * -0.1;
    v = kMu1 * v + (1 - kMu1) * 0.01;
    const double a2 = (m / (1 - kMu * kMu)) / (std::sqrt(v / (1 - kMu1 * kMu1)) + eps);
    const double w2 = w1 - kAlpha * (a2 + l2 * w1 + l1);
    EXPECT_NEAR(got.w1, w1, 2e-7);
    EXPECT_NEAR(got.w1, 0.3993, 3e-6);
    EXPECT_NEAR(got.w2, w2, 2e-7);
    EXPECT_NEAR(got.w2, 0.3993 - 0.1 * (0.2663370 + 0.01 * 0.3993 + 0.002), 3e-6);
    // With no regularisation AdamW is Adam.
    const TwoSteps adamw = two_steps(OptimizerKind::kAdamW);
    const TwoSteps adam = two_steps(OptimizerKind::kAdam);
    EXPECT_EQ(adamw.w1, adam.w1);
    EXPECT_EQ(adamw.w2, adam.w2);
}

TEST(OptimizerRules, EpsilonIsUsedAsDocumented) {
    CpuBackend backend(1);
    // AdaGrad with a gradient of 1e-6: v = 1e-12 < eps = 1e-9, so the step is
    // alpha * g / sqrt(1e-9) = 0.1 * 1e-6 / 3.1622777e-5 = 3.1622777e-3.
    Param run;
    run.w = 0.0f;
    apply(backend, step_of(OptimizerKind::kAdaGrad, 1), run, 1e-6f);
    EXPECT_NEAR(run.w, -0.1 * 1e-6 / std::sqrt(1e-9), 1e-9);
    // Adam with a custom epsilon of 0.1: step 1 is alpha * 0.2 / (0.2 + 0.1).
    Param adam;
    formulas::OptimizerStep s = step_of(OptimizerKind::kAdam, 1);
    s.epsilon = 0.1f;
    apply(backend, s, adam, 0.2f);
    EXPECT_NEAR(adam.w, 0.5 - 0.1 * 0.2 / (0.2 + 0.1), 2e-7);
}

// A 3-row sparse-input matrix (one column), Momentum without regularisation: step 1 touches
// rows 0 and 1, step 2 touches row 1 only. Exact mode keeps moving row 0 with its velocity;
// lazy mode leaves it (and its velocity) alone; row 2 is never touched.
TEST(OptimizerRules, ExactAndLazySparseRowsDifferAsDocumented) {
    for (SparseUpdate mode : {SparseUpdate::kExact, SparseUpdate::kLazy}) {
        CpuBackend backend(1);
        float w[3] = {0.5f, -0.2f, 0.7f}, v[3] = {0, 0, 0};
        MatrixView wv{w, 3, 1, 1};
        uint32_t rows1[2] = {0, 1}, count1 = 2;
        float g1[2] = {0.2f, 0.4f};
        backend.optimizer_step_rows(step_of(OptimizerKind::kMomentum, 1), wv,
                                    SparseRowGrad{rows1, &count1, g1, 2, 1}, v, nullptr, mode);
        uint32_t rows2[1] = {1}, count2 = 1;
        float g2[1] = {-0.1f};
        backend.optimizer_step_rows(step_of(OptimizerKind::kMomentum, 2), wv,
                                    SparseRowGrad{rows2, &count2, g2, 1, 1}, v, nullptr, mode);
        // Row 1 is touched both times: the same in both modes.
        const double v11 = -kAlpha * 0.4;              // -0.04
        const double v12 = kMu * v11 - kAlpha * -0.1;  // -0.036 + 0.01 = -0.026
        EXPECT_NEAR(w[1], -0.2 + v11 + v12, 1e-7);     // -0.266
        EXPECT_NEAR(w[1], -0.266, 1e-7);
        // Row 0: touched at step 1 only.
        const double v01 = -kAlpha * 0.2;  // -0.02
        if (mode == SparseUpdate::kExact) {
            EXPECT_NEAR(w[0], 0.5 + v01 + kMu * v01, 1e-7);  // 0.462: the velocity keeps going
            EXPECT_NEAR(v[0], kMu * v01, 1e-8);              // -0.018
        } else {
            EXPECT_NEAR(w[0], 0.5 + v01, 1e-7);  // 0.48: skipped at step 2
            EXPECT_NEAR(v[0], v01, 1e-8);        // -0.02: not decayed
        }
        // Row 2: never touched, zero velocity: unchanged in both modes.
        EXPECT_EQ(w[2], 0.7f);
        EXPECT_EQ(v[2], 0.0f);
    }
}

// L2 on an untouched row: exact mode shrinks it (w -= alpha * lambda * w), lazy mode does not.
TEST(OptimizerRules, RegularisationOfUntouchedRowsIsExactOnly) {
    for (SparseUpdate mode : {SparseUpdate::kExact, SparseUpdate::kLazy}) {
        CpuBackend backend(1);
        float w[2] = {0.5f, 0.8f};
        MatrixView wv{w, 2, 1, 1};
        uint32_t rows[1] = {0}, count = 1;
        float g[1] = {0.2f};
        backend.optimizer_step_rows(step_of(OptimizerKind::kSgd, 1, 0.05f), wv,
                                    SparseRowGrad{rows, &count, g, 1, 1}, nullptr, nullptr, mode);
        EXPECT_NEAR(w[0], 0.5 - kAlpha * (0.2 + 0.05 * 0.5), 1e-7);  // 0.4775
        EXPECT_NEAR(w[1], mode == SparseUpdate::kExact ? 0.8 - kAlpha * 0.05 * 0.8 : 0.8,
                    1e-7);  // 0.796 or 0.8
    }
}

}  // namespace
}  // namespace sparsenet
