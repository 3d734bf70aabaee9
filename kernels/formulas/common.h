// Shared by the host and device formulas: the host/device qualifier and typed math helpers.
// Every function here is compiled by g++ for the CPU backend and by nvcc for CUDA kernels.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SPARSENET_HD __host__ __device__ __forceinline__
#else
#define SPARSENET_HD inline
#endif

namespace sparsenet::formulas {

// Backend::sum_squares sums each part in chunks of this many elements (row-major order), then the
// chunks' double sums in order, on the CPU (one thread a chunk) and on CUDA (one block a chunk).
constexpr uint64_t kSumSquaresChunk = 8192;

SPARSENET_HD float sn_exp(float x) {
    return expf(x);
}
SPARSENET_HD double sn_exp(double x) {
    return exp(x);
}
SPARSENET_HD float sn_log(float x) {
    return logf(x);
}
SPARSENET_HD double sn_log(double x) {
    return log(x);
}
SPARSENET_HD float sn_tanh(float x) {
    return tanhf(x);
}
SPARSENET_HD double sn_tanh(double x) {
    return tanh(x);
}
SPARSENET_HD float sn_expm1(float x) {
    return expm1f(x);
}
SPARSENET_HD double sn_expm1(double x) {
    return expm1(x);
}
SPARSENET_HD float sn_log1p(float x) {
    return log1pf(x);
}
SPARSENET_HD double sn_log1p(double x) {
    return log1p(x);
}
SPARSENET_HD float sn_sqrt(float x) {
    return sqrtf(x);
}
SPARSENET_HD double sn_sqrt(double x) {
    return sqrt(x);
}

template <typename T>
SPARSENET_HD T sn_max(T a, T b) {
    return a > b ? a : b;
}
template <typename T>
SPARSENET_HD T sn_min(T a, T b) {
    return a < b ? a : b;
}
// |x| without fabs: a select, so the CPU loops stay vectorisable under default flags.
template <typename T>
SPARSENET_HD T sn_abs(T x) {
    return x < T(0) ? -x : x;
}

// sign(x) in {-1, 0, 1} (0 at 0), as DSSTNE's sgn: the L1 regulariser's gradient.
template <typename T>
SPARSENET_HD T sn_sign(T x) {
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
}

// Smallest probability fed to a logarithm: losses stay finite when a float sigmoid saturates.
template <typename T>
SPARSENET_HD T log_floor() {
    return T(1e-7);
}

}  // namespace sparsenet::formulas
