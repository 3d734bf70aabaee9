// Regularisers on activations and norms, written once for CPU and GPU.
//
// Sparseness penalty (DSSTNE's SparsenessPenalty {p, beta}) on a hidden layer: with rho_j the
// batch mean of unit j's activation, clamped to [eps, 1-eps], the batch objective gains
//   beta * sum_j KL(p || rho_j),  KL(p || r) = p log(p/r) + (1-p) log((1-p)/(1-r)),
// whose derivative with respect to one example's activation a_bj is
//   beta * (-p/rho_j + (1-p)/(1-rho_j)) / batch   (0 where the clamp is active).
// Norm clipping (WeightNorm, DeltaNorm): a vector whose L2 norm exceeds max_norm is rescaled to
// max_norm; shorter vectors are left alone.
#pragma once

#include "formulas/common.h"

namespace sparsenet::formulas {

// The batch-mean activation is clamped away from 0 and 1 (the KL divergence is infinite there).
template <typename T>
SPARSENET_HD T sparseness_clamp(T rho) {
    return sn_min(sn_max(rho, log_floor<T>()), T(1) - log_floor<T>());
}

// KL(p || rho) for rho in (0, 1); p in [0, 1] (0 log 0 = 0).
template <typename T>
SPARSENET_HD T sparseness_kl(T p, T rho) {
    T kl = T(0);
    if (p > T(0)) kl += p * sn_log(p / rho);
    if (p < T(1)) kl += (T(1) - p) * sn_log((T(1) - p) / (T(1) - rho));
    return kl;
}

// d KL(p || sparseness_clamp(mean)) / d mean: zero where the clamp is active, so the penalty's
// value and gradient stay consistent (a mean outside (0, 1), e.g. of ReLU units, is not pushed).
template <typename T>
SPARSENET_HD T sparseness_kl_grad(T p, T mean) {
    if (!(mean > log_floor<T>() && mean < T(1) - log_floor<T>())) return T(0);
    return -p / mean + (T(1) - p) / (T(1) - mean);
}

// Factor that brings a vector of squared norm norm2 within max_norm: 1 when it already is.
template <typename T>
SPARSENET_HD T norm_clip_factor(T norm2, T max_norm) {
    return norm2 > max_norm * max_norm ? max_norm / sn_sqrt(norm2) : T(1);
}

}  // namespace sparsenet::formulas
