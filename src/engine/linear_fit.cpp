#include "engine/linear_fit.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "sparsenet/error.h"

// LAPACK's single-precision Cholesky factorisation and inverse (column-major, OpenBLAS).
extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void spotri_(const char* uplo, const int* n, float* a, const int* lda, int* info);
}

namespace sparsenet::engine {

std::vector<float> ease_matrix(const Dataset& x, float lambda, float scale) {
    if (x.is_indexed()) throw Error(ErrorCategory::kInternal, "ease_matrix of an indexed dataset");
    if (!(lambda > 0.0f)) throw Error(ErrorCategory::kInternal, "ease_matrix: lambda <= 0");
    const size_t n = x.cols;
    if (n == 0 || n > size_t(INT32_MAX) / 2) {
        throw Error(ErrorCategory::kData,
                    "EASE fit: " + std::to_string(n) + " columns; expected 1 to 1073741823");
    }
    // The rows by column (CSC), so that each thread owns whole rows of G: G[i, :] is the sum
    // over the examples holding item i of x_ui * x_u.
    std::vector<uint64_t> start(n + 1, 0);
    for (uint64_t e = 0; e < x.nnz(); ++e) start[x.indices[e] + 1]++;
    for (size_t i = 0; i < n; ++i) start[i + 1] += start[i];
    std::vector<uint64_t> fill(start.begin(), start.end() - 1);
    std::vector<uint32_t> row_of(x.nnz());
    std::vector<float> value_of(x.nnz());
    for (uint64_t r = 0; r < x.rows; ++r) {
        for (uint64_t e = x.offsets[r]; e < x.offsets[r + 1]; ++e) {
            const uint64_t at = fill[x.indices[e]]++;
            row_of[at] = static_cast<uint32_t>(r);
            value_of[at] = x.is_boolean() ? 1.0f : x.values[e];
        }
    }
    std::vector<float> g(n * n, 0.0f);
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < int64_t(n); ++i) {
        float* gi = g.data() + size_t(i) * n;
        for (uint64_t k = start[i]; k < start[i + 1]; ++k) {
            const uint64_t r = row_of[k];
            const float xi = value_of[k];
            for (uint64_t e = x.offsets[r]; e < x.offsets[r + 1]; ++e) {
                gi[x.indices[e]] += xi * (x.is_boolean() ? 1.0f : x.values[e]);
            }
        }
        gi[i] += lambda;
    }
    // G is symmetric: its row-major and column-major layouts are the same matrix, so LAPACK's
    // upper triangle (column-major) is our lower one.
    const int ni = static_cast<int>(n);
    int info = 0;
    spotrf_("U", &ni, g.data(), &ni, &info);
    if (info == 0) spotri_("U", &ni, g.data(), &ni, &info);
    if (info != 0) {
        throw Error(ErrorCategory::kData, "EASE fit: X^T X + " + std::to_string(lambda) +
                                              " I is not positive definite "
                                              "in float (LAPACK info " +
                                              std::to_string(info) + "); expected a larger Lambda");
    }
    // P's lower triangle (row-major) holds the inverse: mirror it, then B = -P / diag(P) by
    // column, zero diagonal.
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < i; ++j) g[j * n + i] = g[i * n + j];
    }
    std::vector<float> diag(n);
    for (size_t j = 0; j < n; ++j) diag[j] = g[j * n + j];
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < int64_t(n); ++i) {
        float* bi = g.data() + size_t(i) * n;
        for (size_t j = 0; j < n; ++j) bi[j] = -scale * bi[j] / diag[j];
        bi[i] = 0.0f;
    }
    return g;
}

}  // namespace sparsenet::engine
