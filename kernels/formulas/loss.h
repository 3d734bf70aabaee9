// Losses on one output unit and the output delta (gradient with respect to the pre-activation),
// written once for CPU and GPU. Sparse targets: a target is t = 0 unless the example stores the
// column; ops evaluate the zero-target formulas densely and correct at the stored entries
// (or, with ignore_zero, evaluate the stored entries only).
#pragma once

#include "formulas/activation.h"
#include "formulas/common.h"

namespace sparsenet::formulas {

struct LossParams {
    ErrorFunction kind = ErrorFunction::kCrossEntropy;
    bool multinomial = false;  // CrossEntropy on a SoftMax output: -sum t log a
    // DSSTNE's SparseIgnoreZero: only the stored targets contribute (absent ones are ignored,
    // not treated as 0). Read by the ops, not by the element formulas below.
    bool ignore_zero = false;
    // DSSTNE's DeltaBoost: the delta at a unit with a nonzero target is multiplied by boost_one,
    // elsewhere by boost_zero (element-wise output activations only; the loss is not boosted).
    // Read by the ops.
    float boost_one = 1.0f;
    float boost_zero = 1.0f;
    float one_target = 0.9f;  // SMCE / DataSMCE margins and scales
    float zero_target = 0.1f;
    float one_scale = 1.0f;
    float zero_scale = 1.0f;
};

// Loss of one unit with activation a and target t. A target counts as "positive" when t != 0
// (so a stored 0 behaves like an absent target).
//   L1        |a - t|
//   L2        (a - t)^2 / 2
//   L2Hinge   d^2 / 2, d = min(0, a - t) for t > 0 (push up to t),
//                      d = max(0, a - |t|) for t <= 0 (push down to |t|; DSSTNE's sign coding)
//   Hinge     max(0, 1 - y a), y = +1 for t > 0, -1 otherwise
//   CrossEntropy, SMCE as before; DataSMCE weights SMCE's positive term by t.
template <typename T>
SPARSENET_HD T loss_element(const LossParams& p, T a, T t) {
    switch (p.kind) {
        case ErrorFunction::kL2:
            return T(0.5) * (a - t) * (a - t);
        case ErrorFunction::kL1:
            return sn_abs(a - t);
        case ErrorFunction::kL2Hinge: {
            const T d = t > T(0) ? sn_min(T(0), a - t) : sn_max(T(0), a - sn_abs(t));
            return T(0.5) * d * d;
        }
        case ErrorFunction::kHinge: {
            const T y = t > T(0) ? T(1) : T(-1);
            return sn_max(T(0), T(1) - y * a);
        }
        case ErrorFunction::kCrossEntropy: {
            T loss = -t * sn_log(sn_max(a, log_floor<T>()));
            if (!p.multinomial) loss -= (T(1) - t) * sn_log(sn_max(T(1) - a, log_floor<T>()));
            return loss;
        }
        case ErrorFunction::kScaledMarginalCrossEntropy:
        case ErrorFunction::kDataScaledMarginalCrossEntropy:
            if (t != T(0)) {
                const T w = p.kind == ErrorFunction::kDataScaledMarginalCrossEntropy
                                ? T(p.one_scale) * t
                                : T(p.one_scale);
                return a < T(p.one_target) ? -w * sn_log(sn_max(a, log_floor<T>())) : T(0);
            }
            return a > T(p.zero_target)
                       ? -T(p.zero_scale) * sn_log(sn_max(T(1) - a, log_floor<T>()))
                       : T(0);
    }
    return T(0);
}

// The logarithmic losses' zero-target term, loss_element(p, a, 0) = -zero_log_scale(p) *
// log(zero_log_factor(p, a)), the factor in [log_floor, 1] for a in [0, 1] (1 where the term is
// 0: SMCE below its margin). A sum of such terms is the logarithm of a product: the CPU's dense
// zero-target pass on Sigmoid and SoftMax outputs takes one logarithm per product of four
// factors (cpu::zero_target_log_loss), where loss_element takes one an element.
SPARSENET_HD bool zero_loss_is_log(const LossParams& p) {
    return (p.kind == ErrorFunction::kCrossEntropy && !p.multinomial) ||
           p.kind == ErrorFunction::kScaledMarginalCrossEntropy ||
           p.kind == ErrorFunction::kDataScaledMarginalCrossEntropy;
}
template <typename T>
SPARSENET_HD T zero_log_factor(const LossParams& p, T a) {
    if (p.kind == ErrorFunction::kCrossEntropy) return sn_max(T(1) - a, log_floor<T>());
    return a > T(p.zero_target) ? sn_max(T(1) - a, log_floor<T>()) : T(1);
}
SPARSENET_HD float zero_log_scale(const LossParams& p) {
    return p.kind == ErrorFunction::kCrossEntropy ? 1.0f : p.zero_scale;
}

// dL/da of loss_element (at the kinks of L1 and Hinge: 0 and 0).
template <typename T>
SPARSENET_HD T loss_grad_element(const LossParams& p, T a, T t) {
    switch (p.kind) {
        case ErrorFunction::kL2:
            return a - t;
        case ErrorFunction::kL1:
            return a > t ? T(1) : a < t ? T(-1) : T(0);
        case ErrorFunction::kL2Hinge:
            return t > T(0) ? sn_min(T(0), a - t) : sn_max(T(0), a - sn_abs(t));
        case ErrorFunction::kHinge: {
            const T y = t > T(0) ? T(1) : T(-1);
            return T(1) - y * a > T(0) ? -y : T(0);
        }
        case ErrorFunction::kCrossEntropy: {
            // Zero where loss_element clamps its logarithm, so the two stay consistent.
            T g = a > log_floor<T>() ? -t / a : T(0);
            if (!p.multinomial && T(1) - a > log_floor<T>()) g += (T(1) - t) / (T(1) - a);
            return g;
        }
        case ErrorFunction::kScaledMarginalCrossEntropy:
        case ErrorFunction::kDataScaledMarginalCrossEntropy:
            if (t != T(0)) {
                const T w = p.kind == ErrorFunction::kDataScaledMarginalCrossEntropy
                                ? T(p.one_scale) * t
                                : T(p.one_scale);
                return a < T(p.one_target) && a > log_floor<T>() ? -w / a : T(0);
            }
            return a > T(p.zero_target) && T(1) - a > log_floor<T>() ? T(p.zero_scale) / (T(1) - a)
                                                                     : T(0);
    }
    return T(0);
}

// True when delta = dL/dz has the closed form below, which avoids dividing by a(1-a).
SPARSENET_HD bool has_fused_sigmoid_delta(const LossParams& p, Activation act) {
    return act == Activation::kSigmoid &&
           (p.kind == ErrorFunction::kCrossEntropy ||
            p.kind == ErrorFunction::kScaledMarginalCrossEntropy ||
            p.kind == ErrorFunction::kDataScaledMarginalCrossEntropy);
}

// delta = dL/dz for an element-wise activation (not SoftMax).
template <typename T>
SPARSENET_HD T output_delta_element(const LossParams& p, const ActivationParams& act, T a, T t) {
    if (has_fused_sigmoid_delta(p, act.kind)) {
        if (p.kind == ErrorFunction::kCrossEntropy) return a - t;
        if (t != T(0)) {
            const T w = p.kind == ErrorFunction::kDataScaledMarginalCrossEntropy
                            ? T(p.one_scale) * t
                            : T(p.one_scale);
            return a < T(p.one_target) ? w * (a - T(1)) : T(0);
        }
        return a > T(p.zero_target) ? T(p.zero_scale) * a : T(0);
    }
    return loss_grad_element(p, a, t) * derivative_from_output(act, a);
}

// SoftMax rows: delta_k = a_k * (g_k - sum_j g_j a_j) with g = dL/da. For multinomial
// cross-entropy this is a_k * sum(t) - t_k, computed directly for stability.
template <typename T>
SPARSENET_HD T softmax_delta_element(T a, T g, T dot_ga) {
    return a * (g - dot_ga);
}
template <typename T>
SPARSENET_HD T multinomial_delta_element(T a, T t, T target_sum) {
    return a * target_sum - t;
}

}  // namespace sparsenet::formulas
