// Element-wise activations and their derivatives, written once for CPU and GPU.
// SoftMax is row-wise and handled by the ops; these functions cover the element-wise kinds.
#pragma once

#include "formulas/common.h"
#include "sparsenet/config.h"

namespace sparsenet::formulas {

// a = f(z)
template <typename T>
SPARSENET_HD T activate(Activation act, T z) {
    switch (act) {
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
    }
    return z;
}

// f'(z) expressed through a = f(z): the engine keeps only activations, never pre-activations.
template <typename T>
SPARSENET_HD T derivative_from_output(Activation act, T a) {
    switch (act) {
        case Activation::kSigmoid:
            return a * (T(1) - a);
        case Activation::kTanh:
            return T(1) - a * a;
        case Activation::kRectifiedLinear:
            return a > T(0) ? T(1) : T(0);
        case Activation::kLinear:
            return T(1);
        case Activation::kSoftMax:
            return T(1);  // Jacobian is applied row-wise by the ops
    }
    return T(1);
}

}  // namespace sparsenet::formulas
