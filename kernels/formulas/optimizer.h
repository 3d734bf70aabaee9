// Optimizer update rules for one parameter, written once for CPU and GPU.
//
// g is the gradient of the mean batch loss (DSSTNE's kernels take its negative; the rules are the
// same). The regulariser r = l2 * w + l1 * sign(w) (DSSTNE's lambda and lambda1) is added to g,
// except by AdamW, which applies it decoupled. lr is the step's learning rate with the Decay
// schedule already applied on the host. docs/config-reference.md ("Optimizers") lists the rules
// and where they differ from DSSTNE's kernels.
#pragma once

#include "formulas/common.h"
#include "sparsenet/optimizer.h"

namespace sparsenet::formulas {

// Per-step constants, prepared on the host (the learning-rate schedule and Adam's bias
// corrections need the step count).
struct OptimizerStep {
    OptimizerKind kind = OptimizerKind::kSgd;
    float learning_rate = 0.0f;  // alpha / (1 + Decay * (t - 1)) at step t
    float mu = 0.9f;             // momentum, moving-average rate, or Adam's beta1
    float mu1 = 0.999f;          // Adam's beta2
    float epsilon = 1e-8f;       // Adam: added to sqrt(v); AdaGrad/RMSProp/AdaDelta: a floor
    float l2 = 0.0f;
    float l1 = 0.0f;
    float bias_correction1 = 1.0f;  // 1 / (1 - beta1^t)
    float bias_correction2 = 1.0f;  // 1 / (1 - beta2^t)
};

// Updates w in place; s1/s2 are the optimizer state slots (zero before the first step):
//   SGD       w -= lr g
//   Momentum  s1 = mu s1 - lr g;  w += s1
//   Nesterov  v = s1;  s1 = mu s1 - lr g;  w += s1 + mu (s1 - v)
//   AdaGrad   s1 += g^2;  w -= lr g / sqrt(max(s1, eps))
//   RMSProp   s1 = mu s1 + (1 - mu) g^2;  w -= lr g / sqrt(max(s1, eps))
//   AdaDelta  s2 = mu s2 + (1 - mu) g^2;  d = sqrt(max(s1, eps) / max(s2, eps)) g;
//             s1 = mu s1 + (1 - mu) d^2;  w -= d            (lr is not used, as DSSTNE)
//   Adam      s1 = mu s1 + (1 - mu) g;  s2 = mu1 s2 + (1 - mu1) g^2;
//             w -= lr (s1 bc1) / (sqrt(s2 bc2) + eps)
//   AdamW     as Adam on the unregularised g, then w -= lr r as well (decoupled decay)
// with g already including r for every kind but AdamW.
template <typename T>
SPARSENET_HD void optimizer_update(const OptimizerStep& p, T& w, T g, T& s1, T& s2) {
    const T lr = T(p.learning_rate);
    const T mu = T(p.mu);
    const T eps = T(p.epsilon);
    const T r = T(p.l2) * w + T(p.l1) * sn_sign(w);
    if (p.kind != OptimizerKind::kAdamW) g += r;
    switch (p.kind) {
        case OptimizerKind::kSgd:
            w -= lr * g;
            return;
        case OptimizerKind::kMomentum:
            s1 = mu * s1 - lr * g;
            w += s1;
            return;
        case OptimizerKind::kNesterov: {
            const T v_old = s1;
            s1 = mu * s1 - lr * g;
            w += s1 + mu * (s1 - v_old);
            return;
        }
        case OptimizerKind::kAdaGrad:
            s1 += g * g;
            w -= lr * g / sn_sqrt(sn_max(s1, eps));
            return;
        case OptimizerKind::kRmsProp:
            s1 = mu * s1 + (T(1) - mu) * g * g;
            w -= lr * g / sn_sqrt(sn_max(s1, eps));
            return;
        case OptimizerKind::kAdaDelta: {
            s2 = mu * s2 + (T(1) - mu) * g * g;
            const T d = sn_sqrt(sn_max(s1, eps) / sn_max(s2, eps)) * g;
            s1 = mu * s1 + (T(1) - mu) * d * d;
            w -= d;
            return;
        }
        case OptimizerKind::kAdam:
        case OptimizerKind::kAdamW: {
            const T mu1 = T(p.mu1);
            s1 = mu * s1 + (T(1) - mu) * g;
            s2 = mu1 * s2 + (T(1) - mu1) * g * g;
            const T m_hat = s1 * T(p.bias_correction1);
            const T v_hat = s2 * T(p.bias_correction2);
            T step = m_hat / (sn_sqrt(v_hat) + eps);
            if (p.kind == OptimizerKind::kAdamW) step += r;
            w -= lr * step;
            return;
        }
    }
}

// Number of state slots (each the size of the parameter) an optimizer needs.
SPARSENET_HD constexpr int optimizer_state_slots(OptimizerKind kind) {
    switch (kind) {
        case OptimizerKind::kSgd:
            return 0;
        case OptimizerKind::kMomentum:
        case OptimizerKind::kNesterov:
        case OptimizerKind::kAdaGrad:
        case OptimizerKind::kRmsProp:
            return 1;
        case OptimizerKind::kAdaDelta:
        case OptimizerKind::kAdam:
        case OptimizerKind::kAdamW:
            return 2;
    }
    return 2;
}

// True when a zero gradient leaves the weight and its state bit-identical (SGD and AdaGrad
// without regularisation): a row-sparse update may then visit the touched rows only and still
// equal the dense update exactly.
SPARSENET_HD bool zero_gradient_is_noop(const OptimizerStep& p) {
    return (p.kind == OptimizerKind::kSgd || p.kind == OptimizerKind::kAdaGrad) && p.l2 == 0.0f &&
           p.l1 == 0.0f;
}

// ---- Momentum and Nesterov: the closed-form catch-up of skipped steps ----
//
// SparseUpdate::kExact without walking every row each step (docs/config-reference.md, "Sparse
// updates"): a row of a sparse input's matrix that no batch touches sees a zero gradient, and
// with L1 = 0 and a constant learning rate each such step is the same linear map of each
// element's (velocity s, weight w). With a = lr * l2 (the zero gradient plus the L2 term):
//   Momentum  s' = mu s - a w;   w' = w + s'                  = mu s   + (1 - a) w
//   Nesterov  s' = mu s - a w;   w' = w + s' + mu (s' - s)    = mu^2 s + (1 - (1 + mu) a) w
// so k skipped steps are the k-th power of M = [[mu, -a], [mu or mu^2, 1 - a or 1 - (1 + mu) a]].
// Without L2 (a = 0) it is s_k = mu^k s and w_k = w + s (mu + mu^2 + ... + mu^k) (Momentum;
// Nesterov: mu times that sum): the learning rate drops out, so Decay is allowed. With L2 the
// map depends on lr, so a decaying rate (a different M each step) is not caught up: the caller
// keeps the every-row path (catch_up_exact). L1's sign(w) is not linear: every-row path too.
// Other optimizers have no closed form (AdaGrad's zero-gradient step is a no-op already; Adam's
// and RMSProp's zero-gradient steps divide by a decaying sqrt(v)).

// s_k = ss s + sw w;  w_k = ws s + ww w  (double: applied to float or double values).
struct CatchUp {
    double ss = 1.0, sw = 0.0, ws = 0.0, ww = 1.0;
};

// Whether k zero-gradient steps of p have the closed form above. constant_rate: the learning
// rate is the same at every step (no Decay); it matters only with L2.
SPARSENET_HD bool catch_up_exact(const OptimizerStep& p, bool constant_rate) {
    return (p.kind == OptimizerKind::kMomentum || p.kind == OptimizerKind::kNesterov) &&
           p.l1 == 0.0f && (p.l2 == 0.0f || constant_rate);
}

// M^k by repeated squaring in double (at most 2 log2(k) 2x2 products: a row's coefficients
// cost less than its first element's update). k = 0: the identity.
SPARSENET_HD CatchUp catch_up_coefficients(const OptimizerStep& p, uint32_t k) {
    const double mu = p.mu, a = double(p.learning_rate) * double(p.l2);
    const bool nesterov = p.kind == OptimizerKind::kNesterov;
    CatchUp m;  // M
    m.ss = mu;
    m.sw = -a;
    m.ws = nesterov ? mu * mu : mu;
    m.ww = nesterov ? 1.0 - (1.0 + mu) * a : 1.0 - a;
    CatchUp r;  // the identity
    while (k > 0) {
        if (k & 1u) {
            const CatchUp t = r;
            r.ss = m.ss * t.ss + m.sw * t.ws;
            r.sw = m.ss * t.sw + m.sw * t.ww;
            r.ws = m.ws * t.ss + m.ww * t.ws;
            r.ww = m.ws * t.sw + m.ww * t.ww;
        }
        k >>= 1;
        if (k > 0) {
            const CatchUp t = m;
            m.ss = t.ss * t.ss + t.sw * t.ws;
            m.sw = t.ss * t.sw + t.sw * t.ww;
            m.ws = t.ws * t.ss + t.ww * t.ws;
            m.ww = t.ws * t.sw + t.ww * t.ww;
        }
    }
    return r;
}

// One element caught up: (s, w) := M^k (s, w) with c = catch_up_coefficients(p, k).
template <typename T>
SPARSENET_HD void catch_up_element(const CatchUp& c, T& w, T& s) {
    const T s0 = s, w0 = w;
    s = T(c.ss) * s0 + T(c.sw) * w0;
    w = T(c.ws) * s0 + T(c.ww) * w0;
}

}  // namespace sparsenet::formulas
