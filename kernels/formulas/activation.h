// Element-wise activations and their derivatives, written once for CPU and GPU.
// SoftMax is row-wise and handled by the ops; these functions cover the element-wise kinds.
#pragma once

#include "formulas/common.h"
#include "sparsenet/config.h"

namespace sparsenet::formulas {

// One layer's activation: the kind and its parameters (the layer's RELUSlope / ELUAlpha /
// SELULambda, else the network's). Kinds that take no parameter ignore them.
struct ActivationParams {
    Activation kind = Activation::kSigmoid;
    float slope = 1.0f;        // LeakyRectifiedLinear: z for z > 0, slope * z otherwise (>= 0)
    float alpha = 1.0f;        // ExponentialLinear / ScaledExponentialLinear (>= 0)
    float lambda = 1.050701f;  // ScaledExponentialLinear (> 0)
};

// a = f(z)
template <typename T>
SPARSENET_HD T activate(const ActivationParams& p, T z) {
    switch (p.kind) {
        case Activation::kSigmoid:
            return T(1) / (T(1) + sn_exp(-z));
        case Activation::kTanh:
            return sn_tanh(z);
        case Activation::kRectifiedLinear:
            return z > T(0) ? z : T(0);
        case Activation::kLinear:
            return z;
        case Activation::kSoftMax:
            return z;  // row-wise; never reached element-wise
        case Activation::kLeakyRectifiedLinear:
            return z > T(0) ? z : T(p.slope) * z;
        case Activation::kExponentialLinear:
            return z > T(0) ? z : T(p.alpha) * sn_expm1(z);
        case Activation::kScaledExponentialLinear:
            return T(p.lambda) * (z > T(0) ? z : T(p.alpha) * sn_expm1(z));
        case Activation::kSoftPlus:
            // log(1 + e^z) without overflow: max(z, 0) + log1p(e^-|z|).
            return sn_max(z, T(0)) + sn_log1p(sn_exp(-sn_abs(z)));
        case Activation::kSoftSign:
            return z / (T(1) + sn_abs(z));
    }
    return z;
}

// f'(z) expressed through a = f(z): the engine keeps only activations, never pre-activations.
// Every kind is invertible enough for this (slope >= 0, alpha >= 0, lambda > 0):
//   LeakyRectifiedLinear  a > 0 ? 1 : slope
//   ExponentialLinear     a >= 0 ? 1 : a + alpha            (alpha e^z = a + alpha for z < 0)
//   ScaledExponential..   a >= 0 ? lambda : a + lambda alpha
//   SoftPlus              1 - e^-a  (= sigmoid(z)), computed as -expm1(-a)
//   SoftSign              (1 - |a|)^2  (= 1 / (1 + |z|)^2)
template <typename T>
SPARSENET_HD T derivative_from_output(const ActivationParams& p, T a) {
    switch (p.kind) {
        case Activation::kSigmoid:
            return a * (T(1) - a);
        case Activation::kTanh:
            // (1 - a)(1 + a), not 1 - a * a: near |a| = 1 the latter cancels, and its error,
            // half an ulp of a * a, became relative 1.5e-4 of the result at a = 0.9998; the GPU
            // contracts it into one fused multiply-add and the CPU rounds twice, so the two
            // differed by 4.8e-5 (CudaParity.OutputEpilogueMatchesTheCpu, Tanh / CrossEntropy,
            // H100 2026-11-28). 1 - a is exact for |a| >= 1/2 and the product has no add to
            // contract: relative error under 2^-22 on both, for every a.
            return (T(1) - a) * (T(1) + a);
        case Activation::kRectifiedLinear:
            return a > T(0) ? T(1) : T(0);
        case Activation::kLinear:
            return T(1);
        case Activation::kSoftMax:
            return T(1);  // Jacobian is applied row-wise by the ops
        case Activation::kLeakyRectifiedLinear:
            return a > T(0) ? T(1) : T(p.slope);
        case Activation::kExponentialLinear:
            return a >= T(0) ? T(1) : a + T(p.alpha);
        case Activation::kScaledExponentialLinear:
            return a >= T(0) ? T(p.lambda) : a + T(p.lambda) * T(p.alpha);
        case Activation::kSoftPlus:
            return -sn_expm1(-a);
        case Activation::kSoftSign: {
            const T r = T(1) - sn_abs(a);
            return r * r;
        }
    }
    return T(1);
}

}  // namespace sparsenet::formulas
