// Closed-form fits of an item-item matrix from training rows (FixedWeights, config.h): the
// linear path that a network carries beside its nonlinear one (docs/quality.md, "A linear path
// in the same network").
#pragma once

#include <cstddef>
#include <cstdint>
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

// The graph filter of GF-CF (Shen et al., CIKM 2021) over the rows of x ([examples, n], as
// ease_matrix): with du, di the row and column sums of X and R~ = du^-a X di^-b (a =
// user_exponent, b = item_exponent; a zero degree gives a zero factor),
//   B = R~^T R~ + ideal_weight * di^-b V V^T di^b,
// V the top k eigenvectors of R~^T R~ (its top right singular vectors), returned as scale * B,
// [n, n] row-major. R~^T R~ is accumulated in float; V by top_eigenvectors. Peak: one [n, n]
// float matrix, two for n <= kExactEigenLimit (LAPACK's ssyevr works on a copy).
struct GraphFilterFit {
    uint32_t k = 0;
    float ideal_weight = 0.0f;
    float user_exponent = 0.5f;
    float item_exponent = 0.5f;
};
std::vector<float> graph_filter_matrix(const Dataset& x, const GraphFilterFit& fit, float scale);

// A popularity penalty on the scoring side of a fitted [n, n] matrix b (row-major; scores x . b):
// b[i][j] /= d_j^exponent, d_j the column sum of x (item j's degree; a zero degree gives a zero
// column). RP3beta's beta (Paudel et al. 2017) for any fit: the item-item relations stay, items
// are recommended less the more popular they are. exponent 0 leaves b as it is.
void penalize_popularity(std::vector<float>& b, const Dataset& x, float exponent);

// The eigenvectors of the k largest eigenvalues of the symmetric [n, n] matrix p, as an [n, k]
// column-major matrix (ld n), largest first; each column's sign makes its largest-magnitude
// entry positive. kExact (kAuto up to kExactEigenLimit columns): LAPACK's ssyevr on a copy,
// O(n^3). kSubspace (kAuto beyond): subspace iteration (Halko, Martinsson, Tropp 2011):
// k + max(10, k/2) columns from a fixed seed, `iterations` products with p each followed by a QR
// (sgeqrf/sorgqr), then Rayleigh-Ritz (ssyev on the small projected matrix):
// O(n^2 (k + max(10, k/2)) iterations), deterministic. Gowalla's 40,981 items at k 256: ssyevr
// would take about 10^14 flops, the iteration about 10^13.
enum class EigenMethod { kAuto, kExact, kSubspace };
constexpr size_t kExactEigenLimit = 4096;
std::vector<float> top_eigenvectors(const float* p, size_t n, uint32_t k,
                                    EigenMethod method = EigenMethod::kAuto, int iterations = 6);

}  // namespace sparsenet::engine
