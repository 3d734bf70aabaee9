// Optimizer update rules for one parameter, written once for CPU and GPU.
// g is the gradient of the mean batch loss; L2 decay is added to it.
#pragma once

#include "formulas/common.h"
#include "sparsenet/optimizer.h"

namespace sparsenet::formulas {

// Per-step constants, prepared on the host (bias corrections need the step count).
struct OptimizerStep {
    OptimizerKind kind = OptimizerKind::kSgd;
    float learning_rate = 0.0f;
    float momentum = 0.0f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float epsilon = 1e-8f;
    float l2 = 0.0f;
    float bias_correction1 = 1.0f;  // 1 / (1 - beta1^t)
    float bias_correction2 = 1.0f;  // 1 / (1 - beta2^t)
};

// Updates w in place; s1/s2 are the optimizer state slots (velocity; Adam's m and v).
template <typename T>
SPARSENET_HD void optimizer_update(const OptimizerStep& p, T& w, T g, T& s1, T& s2) {
    g += T(p.l2) * w;
    switch (p.kind) {
        case OptimizerKind::kSgd:
            w -= T(p.learning_rate) * g;
            return;
        case OptimizerKind::kMomentum:
            s1 = T(p.momentum) * s1 - T(p.learning_rate) * g;
            w += s1;
            return;
        case OptimizerKind::kAdam: {
            s1 = T(p.beta1) * s1 + (T(1) - T(p.beta1)) * g;
            s2 = T(p.beta2) * s2 + (T(1) - T(p.beta2)) * g * g;
            const T m_hat = s1 * T(p.bias_correction1);
            const T v_hat = s2 * T(p.bias_correction2);
            w -= T(p.learning_rate) * m_hat / (sn_sqrt(v_hat) + T(p.epsilon));
            return;
        }
    }
}

// Number of state slots (each the size of the parameter) an optimizer needs.
SPARSENET_HD int optimizer_state_slots(OptimizerKind kind) {
    return kind == OptimizerKind::kSgd ? 0 : kind == OptimizerKind::kMomentum ? 1 : 2;
}

}  // namespace sparsenet::formulas
