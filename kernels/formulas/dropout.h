// Dropout of hidden units, written once for CPU and GPU: which units are kept comes from
// keep_unit (rng.h); what a kept or dropped unit becomes is an affine map described here.
//
//   kept:    y = scale * x + shift
//   dropped: y = dropped
//
// Inverted dropout (every activation but ELU/SELU): scale = 1/(1-p), shift = 0, dropped = 0,
// so E[y] = x. Alpha dropout (ELU and SELU layers, as DSSTNE; Klambauer et al. 2017): a dropped
// unit takes the activation's saturation value s = -lambda*alpha (lambda = 1 for ELU), then every
// unit is mapped by a*x + b with a = 1/sqrt(q + s^2 p q), b = -a p s, q = 1-p, which keeps the
// mean and variance of a zero-mean, unit-variance input.
#pragma once

#include "formulas/common.h"

namespace sparsenet::formulas {

struct DropoutParams {
    float p = 0.0f;      // drop probability; p <= 0: no dropout
    uint64_t seed = 0;   // mask key (keep_unit)
    float scale = 1.0f;  // kept units: y = scale * x + shift
    float shift = 0.0f;
    float dropped = 0.0f;  // dropped units: y = dropped
};

SPARSENET_HD DropoutParams inverted_dropout(float p, uint64_t seed) {
    DropoutParams d;
    d.p = p;
    d.seed = seed;
    d.scale = p > 0.0f && p < 1.0f ? 1.0f / (1.0f - p) : 1.0f;
    return d;
}

// saturation: the activation's limit for z -> -inf, -lambda * alpha.
SPARSENET_HD DropoutParams alpha_dropout(float p, uint64_t seed, float saturation) {
    DropoutParams d;
    d.p = p;
    d.seed = seed;
    if (!(p > 0.0f && p < 1.0f)) return d;
    const double q = 1.0 - double(p);
    const double s = double(saturation);
    const double a = 1.0 / sn_sqrt(q + s * s * double(p) * q);
    const double b = -a * double(p) * s;
    d.scale = float(a);
    d.shift = float(b);
    d.dropped = float(a * s + b);
    return d;
}

template <typename T>
SPARSENET_HD T dropout_forward(const DropoutParams& d, bool keep, T x) {
    return keep ? T(d.scale) * x + T(d.shift) : T(d.dropped);
}

// The activation x of a kept unit, recovered from its output y (backward needs f'(x)).
template <typename T>
SPARSENET_HD T dropout_input(const DropoutParams& d, T y) {
    return (y - T(d.shift)) / T(d.scale);
}

}  // namespace sparsenet::formulas
