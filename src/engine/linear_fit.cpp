#include "engine/linear_fit.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "sparsenet/error.h"

// LAPACK's single-precision Cholesky factorisation and inverse (column-major, OpenBLAS).
extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void spotri_(const char* uplo, const int* n, float* a, const int* lda, int* info);
// Symmetric eigenproblems (ssyevr: selected eigenpairs; ssyev: all) and Householder QR.
void ssyevr_(const char* jobz, const char* range, const char* uplo, const int* n, float* a,
             const int* lda, const float* vl, const float* vu, const int* il, const int* iu,
             const float* abstol, int* m, float* w, float* z, const int* ldz, int* isuppz,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info);
void ssyev_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
            float* work, const int* lwork, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
}

namespace sparsenet::engine {

namespace {

// G = X^T W X, [n, n] row-major in float, W = diag(row_weight) (null: the identity), with
// `diagonal` added to G's diagonal. The rows by column (CSC), so that each thread owns whole
// rows of G: G[i, :] is the sum over the examples u holding item i of w_u * x_ui * x_u.
std::vector<float> gram(const Dataset& x, const std::vector<float>* row_weight, float diagonal) {
    const size_t n = x.cols;
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
            const float v = x.is_boolean() ? 1.0f : x.values[e];
            value_of[at] = row_weight != nullptr ? (*row_weight)[r] * v : v;
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
        gi[i] += diagonal;
    }
    return g;
}

// The row and column sums of x (a boolean entry counts 1).
void degrees(const Dataset& x, std::vector<double>& du, std::vector<double>& di) {
    du.assign(x.rows, 0.0);
    di.assign(x.cols, 0.0);
    for (uint64_t r = 0; r < x.rows; ++r) {
        for (uint64_t e = x.offsets[r]; e < x.offsets[r + 1]; ++e) {
            const double v = x.is_boolean() ? 1.0 : x.values[e];
            du[r] += v;
            di[x.indices[e]] += v;
        }
    }
}

// d^e, and 0 for a zero degree.
double power(double d, double e) {
    return d > 0.0 ? std::pow(d, e) : 0.0;
}

void check_columns(const Dataset& x, const char* fit) {
    const size_t n = x.cols;
    if (n == 0 || n > size_t(INT32_MAX) / 2) {
        throw Error(ErrorCategory::kData, std::string(fit) + " fit: " + std::to_string(n) +
                                              " columns; expected 1 to 1073741823");
    }
}

}  // namespace

std::vector<float> ease_matrix(const Dataset& x, float lambda, float scale) {
    if (x.is_indexed()) throw Error(ErrorCategory::kInternal, "ease_matrix of an indexed dataset");
    if (!(lambda > 0.0f)) throw Error(ErrorCategory::kInternal, "ease_matrix: lambda <= 0");
    check_columns(x, "EASE");
    const size_t n = x.cols;
    std::vector<float> g = gram(x, nullptr, lambda);
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

namespace {

void lapack_check(int info, const char* routine) {
    if (info != 0) {
        throw Error(ErrorCategory::kInternal, std::string("GraphFilter fit: LAPACK ") + routine +
                                                  " failed (info " + std::to_string(info) + ")");
    }
}

// Orthonormal columns spanning those of a ([n, m] column-major, m <= n), in place.
void orthonormalize(float* a, int n, int m) {
    std::vector<float> tau(static_cast<size_t>(m));
    int info = 0, lwork = -1;
    float size = 0.0f;
    sgeqrf_(&n, &m, a, &n, tau.data(), &size, &lwork, &info);
    lwork = std::max(1, int(size));
    std::vector<float> work(static_cast<size_t>(lwork));
    sgeqrf_(&n, &m, a, &n, tau.data(), work.data(), &lwork, &info);
    lapack_check(info, "sgeqrf");
    lwork = -1;
    sorgqr_(&n, &m, &m, a, &n, tau.data(), &size, &lwork, &info);
    lwork = std::max(1, int(size));
    work.assign(size_t(lwork), 0.0f);
    sorgqr_(&n, &m, &m, a, &n, tau.data(), work.data(), &lwork, &info);
    lapack_check(info, "sorgqr");
}

// Each column's largest-magnitude entry (the first of equals) made positive: the eigenvectors'
// signs are otherwise arbitrary.
void fix_signs(float* v, size_t n, uint32_t k) {
    for (uint32_t c = 0; c < k; ++c) {
        float* col = v + size_t(c) * n;
        size_t at = 0;
        for (size_t i = 1; i < n; ++i) {
            if (std::fabs(col[i]) > std::fabs(col[at])) at = i;
        }
        if (col[at] < 0.0f) {
            for (size_t i = 0; i < n; ++i) col[i] = -col[i];
        }
    }
}

}  // namespace

std::vector<float> top_eigenvectors(const float* p, size_t n, uint32_t k, EigenMethod method,
                                    int iterations) {
    if (k == 0 || n == 0) return {};
    if (k > n) throw Error(ErrorCategory::kInternal, "top_eigenvectors: k > n");
    const int ni = int(n);
    std::vector<float> v(n * size_t(k));
    int info = 0;
    if (method == EigenMethod::kExact || (method == EigenMethod::kAuto && n <= kExactEigenLimit)) {
        std::vector<float> a(p, p + n * n);  // ssyevr overwrites its input
        const int il = ni - int(k) + 1, iu = ni;
        const float unused = 0.0f, abstol = 0.0f;
        int found = 0, lwork = -1, liwork = -1, isize = 0;
        float size = 0.0f;
        std::vector<float> w(n);
        std::vector<int> support(2 * size_t(k));
        ssyevr_("V", "I", "U", &ni, a.data(), &ni, &unused, &unused, &il, &iu, &abstol, &found,
                w.data(), v.data(), &ni, support.data(), &size, &lwork, &isize, &liwork, &info);
        lwork = std::max(1, int(size));
        liwork = std::max(1, isize);
        std::vector<float> work(static_cast<size_t>(lwork));
        std::vector<int> iwork(static_cast<size_t>(liwork));
        ssyevr_("V", "I", "U", &ni, a.data(), &ni, &unused, &unused, &il, &iu, &abstol, &found,
                w.data(), v.data(), &ni, support.data(), work.data(), &lwork, iwork.data(), &liwork,
                &info);
        lapack_check(info, "ssyevr");
        if (found != int(k)) lapack_check(-1000 - found, "ssyevr (eigenvalues found)");
        // Ascending: the largest last.
        for (uint32_t c = 0; c < k / 2; ++c) {
            std::swap_ranges(v.begin() + size_t(c) * n, v.begin() + size_t(c + 1) * n,
                             v.begin() + size_t(k - 1 - c) * n);
        }
        fix_signs(v.data(), n, k);
        return v;
    }
    // Subspace iteration: q columns, normal entries from a fixed seed (Box-Muller over
    // mt19937_64, whose sequence the standard fixes; std::normal_distribution's it does not).
    const uint32_t q = uint32_t(std::min<size_t>(n, size_t(k) + std::max<uint32_t>(10, k / 2)));
    const int qi = int(q);
    std::vector<float> basis(n * q), product(n * q);
    std::mt19937_64 rng(0x6766636675ull);
    const double two_pi = 6.283185307179586;
    for (size_t i = 0; i < basis.size(); ++i) {
        const double u1 = (double(rng() >> 11) + 1.0) * 0x1p-53, u2 = double(rng() >> 11) * 0x1p-53;
        basis[i] = float(std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2));
    }
    orthonormalize(basis.data(), ni, qi);
    for (int it = 0; it < iterations; ++it) {
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, ni, qi, ni, 1.0f, p, ni,
                    basis.data(), ni, 0.0f, product.data(), ni);
        std::swap(basis, product);
        orthonormalize(basis.data(), ni, qi);
    }
    // Rayleigh-Ritz: T = Q^T p Q ([q, q]), its eigenvectors rotate Q onto p's.
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, ni, qi, ni, 1.0f, p, ni, basis.data(),
                ni, 0.0f, product.data(), ni);
    std::vector<float> t(size_t(q) * q);
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, qi, qi, ni, 1.0f, basis.data(), ni,
                product.data(), ni, 0.0f, t.data(), qi);
    std::vector<float> w(q);
    int lwork = -1;
    float size = 0.0f;
    ssyev_("V", "U", &qi, t.data(), &qi, w.data(), &size, &lwork, &info);
    lwork = std::max(1, int(size));
    std::vector<float> work(static_cast<size_t>(lwork));
    ssyev_("V", "U", &qi, t.data(), &qi, w.data(), work.data(), &lwork, &info);
    lapack_check(info, "ssyev");
    // The k largest (ascending order: the last k columns of t), largest first.
    for (uint32_t c = 0; c < k; ++c) {
        cblas_sgemv(CblasColMajor, CblasNoTrans, ni, qi, 1.0f, basis.data(), ni,
                    t.data() + size_t(q - 1 - c) * q, 1, 0.0f, v.data() + size_t(c) * n, 1);
    }
    fix_signs(v.data(), n, k);
    return v;
}

std::vector<float> graph_filter_matrix(const Dataset& x, const GraphFilterFit& fit, float scale) {
    if (x.is_indexed()) {
        throw Error(ErrorCategory::kInternal, "graph_filter_matrix of an indexed dataset");
    }
    check_columns(x, "GraphFilter");
    const size_t n = x.cols;
    if (fit.k > n) {
        throw Error(ErrorCategory::kData, "GraphFilter fit: K = " + std::to_string(fit.k) +
                                              " singular vectors of a matrix of " +
                                              std::to_string(n) + " items; expected at most " +
                                              std::to_string(n));
    }
    // Degrees (row and column sums), and their powers; a zero degree gives a zero factor.
    std::vector<double> du, di;
    degrees(x, du, di);
    std::vector<float> row_weight(x.rows);
    for (uint64_t r = 0; r < x.rows; ++r) {
        row_weight[r] = float(power(du[r], -2.0 * fit.user_exponent));
    }
    std::vector<float> left(n), right(n);  // di^-b and di^b
    for (size_t i = 0; i < n; ++i) {
        left[i] = float(power(di[i], -double(fit.item_exponent)));
        right[i] = float(power(di[i], double(fit.item_exponent)));
    }
    // R~^T R~ = di^-b (X^T du^-2a X) di^-b.
    std::vector<float> b = gram(x, &row_weight, 0.0f);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < int64_t(n); ++i) {
        float* bi = b.data() + size_t(i) * n;
        for (size_t j = 0; j < n; ++j) bi[j] *= left[i] * left[j];
    }
    if (fit.k > 0 && fit.ideal_weight > 0.0f) {
        const std::vector<float> v = top_eigenvectors(b.data(), n, fit.k);
        // + ideal_weight * di^-b V V^T di^b, by blocks of rows (V V^T of a block: [rows, n]).
        const size_t block = 256;
        std::vector<float> vvt(block * n);
        const int ni = int(n), ki = int(fit.k);
        for (size_t i0 = 0; i0 < n; i0 += block) {
            const int rows = int(std::min(block, n - i0));
            // Column-major [n, rows] = V V_block^T: row-major [rows, n] = V_block V^T.
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, ni, rows, ki, 1.0f, v.data(), ni,
                        v.data() + i0, ni, 0.0f, vvt.data(), ni);
#pragma omp parallel for schedule(static)
            for (int r = 0; r < rows; ++r) {
                const size_t i = i0 + size_t(r);
                float* bi = b.data() + i * n;
                const float* ti = vvt.data() + size_t(r) * n;
                const float li = fit.ideal_weight * left[i];
                for (size_t j = 0; j < n; ++j) bi[j] += li * ti[j] * right[j];
            }
        }
    }
    if (scale != 1.0f) {
        for (float& e : b) e *= scale;
    }
    return b;
}

void penalize_popularity(std::vector<float>& b, const Dataset& x, float exponent) {
    const size_t n = x.cols;
    if (b.size() != n * n) {
        throw Error(ErrorCategory::kInternal, "penalize_popularity: a matrix of " +
                                                  std::to_string(b.size()) + " values for " +
                                                  std::to_string(n) + " items");
    }
    if (exponent == 0.0f) return;
    std::vector<double> du, di;
    degrees(x, du, di);
    std::vector<float> factor(n);
    for (size_t j = 0; j < n; ++j) factor[j] = float(power(di[j], -double(exponent)));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < int64_t(n); ++i) {
        float* bi = b.data() + size_t(i) * n;
        for (size_t j = 0; j < n; ++j) bi[j] *= factor[j];
    }
}

}  // namespace sparsenet::engine
