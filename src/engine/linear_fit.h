// Closed-form fits of an item-item matrix from training rows (FixedWeights, config.h): the
// linear path that a network carries beside its nonlinear one (docs/quality.md, "A linear path
// in the same network").
#pragma once

#include <vector>

#include "sparsenet/dataset.h"

namespace sparsenet::engine {

// EASE^R (Steck, WWW 2019) of the rows of x ([examples, n], not indexed; boolean entries count
// 1, valued ones their value; example weights are ignored):
//   G = X^T X + lambda I,  P = G^-1,  B[i][j] = -P[i][j] / P[j][j] (i != j),  B[j][j] = 0,
// returned as scale * B, [n, n] row-major, so that the scores of a row x are x . B. G is
// accumulated in float (exact for integer counts below 2^24) and inverted in float by LAPACK's
// Cholesky (spotrf + spotri, OpenBLAS), in place: the peak is one [n, n] float matrix plus the
// rows' column index (Gowalla's 40,981 items: 6.7 GB). lambda > 0 keeps G positive definite;
// Error(kData) if LAPACK still finds it is not.
std::vector<float> ease_matrix(const Dataset& x, float lambda, float scale);

}  // namespace sparsenet::engine
