// Dense CPU ops: gemm, bias + activation, activation backward, column sums, dropout and the
// optimizer updates. Included by cpu_ops.h (views, scratch and helpers live there).
#pragma once

#include <cblas.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_ops.h"
#include "formulas/common.h"
#include "formulas/precision.h"

namespace sparsenet::cpu {

// ---- gemm ----

inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                      const float* a, int lda, const float* b, int ldb, float beta, float* c,
                      int ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
                      const double* a, int lda, const double* b, int ldb, double beta, double* c,
                      int ldc) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Rows of op(a) up to which gemm streams b itself instead of calling BLAS.
constexpr size_t kGemmFewRows = 4;

// c = alpha * op(a) . op(b) + beta * c for m <= kGemmFewRows rows (one query, a handful of
// users), in one pass over b, one slice of columns per thread. Why not BLAS: sgemm packs
// all of b before multiplying, which for a single row doubles the memory traffic of a
// bandwidth-bound product (1 x 600 x 27278: 4.2 ms instead of 2.2 ms on one core of the
// development VM), and OpenBLAS's threads follow the calling thread's omp_get_max_threads()
// instead of `threads`, so concurrent callers (Recommender) could not bound them. Every element
// of c sums the inner dimension in the same order whatever the thread count.
template <class T>
void gemm_few_rows(bool trans_a, bool trans_b, T alpha, CMatT<T> a, CMatT<T> b, T beta, MatT<T> c,
                   int threads) {
    const size_t m = c.rows, n = c.cols;
    const size_t k = trans_a ? a.rows : a.cols;
    check(m <= kGemmFewRows, "gemm", "too many rows for the few-rows path");
    // The rows of op(a), contiguous: rows of a, or gathered columns when a is transposed.
    std::vector<T> gathered;
    const T* x[kGemmFewRows] = {};
    if (!trans_a) {
        for (size_t r = 0; r < m; ++r) x[r] = a.row(r);
    } else {
        gathered.resize(m * k);
        for (size_t q = 0; q < k; ++q)
            for (size_t r = 0; r < m; ++r) gathered[r * k + q] = a.row(q)[r];
        for (size_t r = 0; r < m; ++r) x[r] = gathered.data() + r * k;
    }
    auto store = [alpha, beta](T* cr, size_t j, T sum) {
        cr[j] = beta == T(0) ? alpha * sum : alpha * sum + beta * cr[j];
    };
    if (trans_b) {  // b is [n, k]: c[r, j] = alpha * <x_r, b[j, :]>, rows of b are contiguous
        const bool par = parallel_worth(k * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t j = 0; j < n; ++j) {
            const T* __restrict bj = b.row(j);
            for (size_t r = 0; r < m; ++r) {
                const T* __restrict xr = x[r];
                T sum = T(0);
#pragma omp simd reduction(+ : sum)
                for (size_t q = 0; q < k; ++q) sum += xr[q] * bj[q];
                store(c.row(r), j, sum);
            }
        }
        return;
    }
    // b is [k, n]: sums of x_r[q] * b[q, :] over q, four rows of b at a time, each thread over
    // one contiguous slice of columns. One row of a: the slice in one piece, so b streams by once
    // in address order (finer column blocks measured 5-10 % slower: more streams for the
    // prefetcher). Several rows: blocks of 1024 columns, so the four rows of b read for every
    // row of a come from L1 instead of L2 (4 x 600 x 27278 on one core: 3.9 ms instead of
    // 8.9). The sums live in c itself when beta == 0, else in scratch.
    std::vector<T> scratch(beta == T(0) ? 0 : m * n);
    T* sums[kGemmFewRows] = {};
    for (size_t r = 0; r < m; ++r) sums[r] = beta == T(0) ? c.row(r) : scratch.data() + r * n;
    const int team = parallel_worth(k * n, threads) ? threads : 1;
    const size_t width = (n / size_t(team) + 16) / 16 * 16;
#pragma omp parallel for num_threads(team) schedule(static) if (team > 1)
    for (int t = 0; t < team; ++t) {
        const size_t j0 = std::min(n, size_t(t) * width), j1 = std::min(n, j0 + width);
        const size_t block = m == 1 ? j1 - j0 : size_t(1024);
        for (size_t c0 = j0; c0 < j1; c0 += block) {
            const size_t nc = std::min(block, j1 - c0);
            for (size_t r = 0; r < m; ++r) std::fill(sums[r] + c0, sums[r] + c0 + nc, T(0));
            size_t q = 0;
            for (; q + 4 <= k; q += 4) {
                const T* b0 = b.row(q) + c0;
                const T* b1 = b.row(q + 1) + c0;
                const T* b2 = b.row(q + 2) + c0;
                const T* b3 = b.row(q + 3) + c0;
                for (size_t r = 0; r < m; ++r)
                    axpy4(sums[r] + c0, b0, b1, b2, b3, x[r][q], x[r][q + 1], x[r][q + 2],
                          x[r][q + 3], nc);
            }
            for (; q < k; ++q)
                for (size_t r = 0; r < m; ++r) axpy1(sums[r] + c0, b.row(q) + c0, x[r][q], nc);
            for (size_t r = 0; r < m; ++r)
                for (size_t j = c0; j < c0 + nc; ++j) store(c.row(r), j, sums[r][j]);
        }
    }
}

// c = alpha * op(a) . op(b) + beta * c (beta == 0 overwrites c, NaNs included).
// OpenBLAS threads itself (its OpenMP build follows omp_get_max_threads()); up to kGemmFewRows
// rows never reach it (gemm_few_rows).
template <class T>
void gemm(bool trans_a, bool trans_b, T alpha, CMatT<T> a, CMatT<T> b, T beta, MatT<T> c,
          int threads) {
    const size_t m = c.rows, n = c.cols;
    const size_t k = trans_a ? a.rows : a.cols;
    if (m == 0 || n == 0) return;
    if (k == 0) {  // op(a) . op(b) is zero: only the beta scaling remains
        for (size_t r = 0; r < m; ++r) {
            T* cr = c.row(r);
            for (size_t j = 0; j < n; ++j) cr[j] = beta == T(0) ? T(0) : beta * cr[j];
        }
        return;
    }
    if (m <= kGemmFewRows) {
        gemm_few_rows(trans_a, trans_b, alpha, a, b, beta, c, threads);
        return;
    }
    const size_t imax = size_t(INT_MAX);
    check(m <= imax && n <= imax && k <= imax && a.ld <= imax && b.ld <= imax && c.ld <= imax,
          "gemm", "dimension exceeds the BLAS integer range");
    blas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(k), alpha, a.data, int(std::max<size_t>(a.ld, 1)), b.data,
              int(std::max<size_t>(b.ld, 1)), beta, c.data, int(std::max<size_t>(c.ld, 1)));
}

#if defined(__AVX512F__)
// formulas::bf16_bits of the 16 floats at src (the same integer rounding, NaN kept quiet), as
// 16-bit lanes: a vpmovdw narrows them. Intrinsics rather than the compiler's vector extensions,
// which narrowed through vpermt2w and kept the NaN test in a vector: dsstne-bench's weights' copy
// after each SGD step (1,024 x 27,280, 2 threads, in the step) took 7.5-7.6 ms that way, 7.0 this
// way; alone, 8.2 against 6.9 (Intel Xeon with AMX, 2026-12-02).
inline __m256i bf16_bits16(const float* src) {
    // (All-lanes maskz forms: GCC 12's unmasked srli and cvtepi32_epi16 warn -Wmaybe-uninitialized
    // about their own undefined source, GCC bug 105593; the instructions are the same.)
    constexpr __mmask16 all = 0xffff;
    const __m512i u = _mm512_loadu_si512(src);
    const __m512i upper = _mm512_maskz_srli_epi32(all, u, 16);
    const __m512i bias =
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(upper, _mm512_set1_epi32(1)));
    const __m512i rounded = _mm512_maskz_srli_epi32(all, _mm512_add_epi32(u, bias), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_maskz_cvtepi32_epi16(
        all, _mm512_mask_or_epi32(rounded, nan, upper, _mm512_set1_epi32(0x40)));
}
#endif

// The BF16 copy of n values (Backend's out_bf16: formulas::bf16_bits of each): the one loop of
// every BF16 copy the CPU writes (round_bf16, the producers' copies, optimizer_step's w_bf16),
// written by the op that produced the values while they are in cache. dst == nullptr: nothing.
inline void write_bf16(const float* __restrict src, uint16_t* __restrict dst, size_t n) {
    if (dst == nullptr) return;
    size_t j = 0;
#if defined(__AVX512F__)
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), bf16_bits16(src + j));
#elif defined(__GNUC__)  // GCC and Clang vector extensions: the same rounding on 16 lanes
    using U32x16 = uint32_t __attribute__((vector_size(64)));
    using U16x16 = uint16_t __attribute__((vector_size(32)));
    for (; j + 16 <= n; j += 16) {
        U32x16 u;
        std::memcpy(&u, src + j, sizeof u);
        const U32x16 upper = u >> 16;
        const U32x16 rounded = (u + 0x7fffu + (upper & 1u)) >> 16;
        const U32x16 nan = (U32x16)((u & 0x7fffffffu) > 0x7f800000u);  // all ones where NaN
        const U16x16 h =
            __builtin_convertvector((nan & (upper | 0x40u)) | (~nan & rounded), U16x16);
        std::memcpy(dst + j, &h, sizeof h);
    }
#endif
    for (; j < n; ++j) dst[j] = formulas::bf16_bits(src[j]);
}

inline void write_bf16(const double* __restrict src, uint16_t* __restrict dst, size_t n) {
    if (dst == nullptr) return;
    for (size_t j = 0; j < n; ++j) dst[j] = formulas::bf16_bits(float(src[j]));
}

// The BF16 copy of m (Backend::round_bf16): out has m's layout, [cols, ld) set to zero.
// (Streaming stores, which skip reading the copy's lines before writing them, were tried for the
// weights' copy after each SGD step and measured no faster in the step: 7.0-7.4 ms against 7.0.)
inline void round_bf16_into(CMatT<float> m, uint16_t* out, int threads) {
    const bool par = threads > 1 && m.rows * m.ld >= (size_t(1) << 16);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < m.rows; ++r) {
        const float* src = m.row(r);
        uint16_t* dst = out + r * m.ld;
        write_bf16(src, dst, m.cols);
        for (size_t j = m.cols; j < m.ld; ++j) dst[j] = 0;
    }
}

// The BF16 operand of oneDNN's matmul (bf16_matmul.h), [m.rows, width] dense (width >= m.cols):
// m's BF16 copy in place when it is laid out so (ld == width), else packed into out from the copy,
// or rounded from m.data where there is none, with zeros in columns [m.cols, width).
inline const uint16_t* dense_bf16(CMatT<float> m, const uint16_t* copy, size_t width,
                                  std::vector<uint16_t>& out, int threads) {
    if (copy != nullptr && m.ld == width) return copy;
    out.resize(m.rows * width);
    const bool par = threads > 1 && m.rows * width >= (size_t(1) << 16);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < m.rows; ++r) {
        uint16_t* dst = out.data() + r * width;
        if (copy != nullptr) {
            std::memcpy(dst, copy + r * m.ld, m.cols * sizeof(uint16_t));
        } else {
            write_bf16(m.row(r), dst, m.cols);
        }
        for (size_t j = m.cols; j < width; ++j) dst[j] = 0;
    }
    return out.data();
}

// ---- activations ----

// SoftMax of one row in place, with max subtraction; the normaliser is summed in double.
template <class T>
inline void softmax_row(T* z, size_t n) {
    if (n == 0) return;
    T mx = z[0];
#pragma omp simd reduction(max : mx)
    for (size_t j = 1; j < n; ++j) mx = z[j] > mx ? z[j] : mx;
#pragma omp simd
    for (size_t j = 0; j < n; ++j) z[j] = formulas::sn_exp(z[j] - mx);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (size_t j = 0; j < n; ++j) sum += double(z[j]);
    const T inv = T(1.0 / sum);
#pragma omp simd
    for (size_t j = 0; j < n; ++j) z[j] *= inv;
}

// z[j] = f(z[j] + bias[j]) (bias may be null) for the element-wise activation A. The kind is a
// constant of a private copy, so the formula's switch folds away and GCC vectorises the loop
// (with libmvec's expf, tanhf, ...).
template <Activation A, class T>
inline void activate_elements(formulas::ActivationParams p, const T* __restrict bias,
                              T* __restrict z, size_t n) {
    p.kind = A;
    if (bias != nullptr) {
#pragma omp simd
        for (size_t j = 0; j < n; ++j) z[j] = formulas::activate(p, z[j] + bias[j]);
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; ++j) z[j] = formulas::activate(p, z[j]);
    }
}

// activate_elements over a row with every element through the same vector code: the last
// n % 16 go through a 16-wide copy. libmvec's vector functions can differ in the last bit from
// the scalar ones a remainder loop would call; this way no element's value depends on its
// position in the row, which the Recommender's fp16 screening relies on (it recomputes single
// items: docs/library.md, "fp16 screening").
template <Activation A, class T>
void activate_row(const formulas::ActivationParams& p, const T* bias, T* z, size_t n) {
    constexpr size_t kWidth = 16;
    const size_t whole = n / kWidth * kWidth;
    activate_elements<A>(p, bias, z, whole);
    if (whole == n) return;
    alignas(64) T tail_z[kWidth] = {};
    alignas(64) T tail_b[kWidth] = {};
    std::copy(z + whole, z + n, tail_z);
    if (bias != nullptr) std::copy(bias + whole, bias + n, tail_b);
    activate_elements<A>(p, bias != nullptr ? tail_b : nullptr, tail_z, kWidth);
    std::copy(tail_z, tail_z + (n - whole), z + whole);
}

// One row of bias_activation_forward: z := f(z + bias) (bias may be null), SoftMax row-wise.
// Also the first step of output_epilogue's row (cpu_ops_sparse.h): the same values bit for bit.
template <Activation A, class T>
inline void bias_activation_row(const formulas::ActivationParams& act, const T* bias, T* z,
                                size_t n) {
    if constexpr (A == Activation::kSoftMax) {
        if (bias != nullptr)
            for (size_t j = 0; j < n; ++j) z[j] += bias[j];
        softmax_row(z, n);
    } else {
        activate_row<A>(act, bias, z, n);
    }
}

// In place: z := f(z + bias) row by row; bias [cols] or nullptr; SoftMax is row-wise.
// z_bf16 (nullable): each new row's BF16 copy (z's layout, padding not written).
template <class T>
void bias_activation_forward(const formulas::ActivationParams& act, const T* bias, MatT<T> z,
                             int threads, uint16_t* z_bf16 = nullptr) {
    const size_t rows = z.rows, n = z.cols;
    if (rows == 0 || n == 0) return;
    const bool par = parallel_worth(rows * n, threads);
    dispatch_activation(act.kind, [&](auto a_const) {
        constexpr Activation A = decltype(a_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t r = 0; r < rows; ++r) {
            // A private copy with the kind a constant: the formula's switch folds away (a copy
            // shared across the parallel region would be read through a pointer, every element).
            formulas::ActivationParams p = act;
            p.kind = A;
            bias_activation_row<A>(p, bias, z.row(r), n);
            if (z_bf16 != nullptr) write_bf16(z.row(r), z_bf16 + r * z.ld, n);
        }
    });
}

inline uint64_t example_of(const BatchRows& rows, size_t r) {
    return rows.rows != nullptr ? uint64_t(rows.rows[r]) : rows.first_row + r;
}

// activation_backward on the units [j0, j1) of one row (ar, dr: the row's start); ex: the row's
// example. The same per-unit formulas as the whole-row pass, so activation_backward_column_sum
// (which walks column blocks) gives the same values bit for bit.
template <Activation A, class T>
inline void activation_backward_span(const formulas::ActivationParams& act, bool masked,
                                     const formulas::DropoutParams& mask_params, uint64_t ex,
                                     uint64_t col0, const T* __restrict ar, T* __restrict dr,
                                     size_t j0, size_t j1) {
    formulas::ActivationParams p = act;  // private, kind constant (see bias_activation_forward)
    p.kind = A;
    if (!masked) {
#pragma omp simd
        for (size_t j = j0; j < j1; ++j) dr[j] *= formulas::derivative_from_output(p, ar[j]);
        return;
    }
    const formulas::DropoutParams dp = mask_params;  // private copy, as p
    const T scale = T(dp.scale);
#pragma omp simd
    for (size_t j = j0; j < j1; ++j) {
        const bool keep = formulas::keep_unit(dp.seed, ex, col0 + j, dp.p);
        const T x = formulas::dropout_input(dp, ar[j]);
        dr[j] = keep ? dr[j] * scale * formulas::derivative_from_output(p, x) : T(0);
    }
}

// In place: d := dL/dz from d = dL/da for element-wise activations. Without a mask,
// d *= f'(a). With a dropout mask, a holds the activations after dropout: kept units get
// d * scale * f'(x), x = dropout_input(a); dropped units get 0. SoftMax throws Error(kInternal):
// its Jacobian is applied by output_delta.
// d_bf16 (nullable): each new row's BF16 copy (d's layout).
template <class T>
void activation_backward(const formulas::ActivationParams& act, CMatT<T> a, const DropoutMask* mask,
                         MatT<T> d, int threads, uint16_t* d_bf16 = nullptr) {
    const size_t rows = d.rows, n = d.cols;
    if (rows == 0 || n == 0) return;
    const bool masked = mask != nullptr && mask->params.p > 0.0f;
    const bool par = parallel_worth(rows * n, threads);
    dispatch_activation(act.kind, [&](auto a_const) {
        constexpr Activation A = decltype(a_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t r = 0; r < rows; ++r) {
            const formulas::DropoutParams dp = masked ? mask->params : formulas::DropoutParams{};
            const uint64_t ex = masked ? example_of(mask->rows, r) : 0;
            activation_backward_span<A>(act, masked, dp, ex, masked ? mask->col_offset : 0,
                                        a.row(r), d.row(r), 0, n);
            if (d_bf16 != nullptr) write_bf16(d.row(r), d_bf16 + r * d.ld, n);
        }
    });
}

// The column block of column_sum and activation_backward_column_sum: a block reads w floats of
// each row, the rows a row's length apart, and sums each column over the rows in increasing
// order, so the width decides the speed only, never the bits. Wide blocks let the prefetcher
// follow: dsstne-bench's output delta (256 x 27,280, 2 threads) summed in 1.9 ms a step in blocks
// of 128 floats (512 bytes of each row), in 1.1 ms in blocks of 1,024 (a page), and its hidden
// layers' fused op took 0.29 ms a layer instead of 0.38 (Intel Xeon with AMX, 2026-12-02).
// Narrower only so that each thread has a block (a 1,024-wide layer on 2 threads: 2 of 512).
constexpr size_t kColumnBlockMax = 1024;
inline size_t column_sum_block(size_t cols, int threads) {
    const size_t t = size_t(threads > 0 ? threads : 1);
    const size_t per_thread = ((cols + t - 1) / t + 15) / 16 * 16;
    return std::clamp<size_t>(per_thread, 128, kColumnBlockMax);
}

// out[c] = alpha * sum_r m[r, c] + beta * out[c] (beta == 0 overwrites). Sums run in double
// over rows in increasing order, per block of columns: deterministic for any thread count.
template <class T>
void column_sum(CMatT<T> m, T alpha, T beta, T* out, int threads) {
    const size_t rows = m.rows, n = m.cols;
    const size_t block = column_sum_block(n, threads);
    const size_t blocks = (n + block - 1) / block;
    const bool par = blocks > 1 && parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t blk = 0; blk < blocks; ++blk) {
        const size_t c0 = blk * block, w = std::min(block, n - c0);
        double acc[kColumnBlockMax];
        for (size_t j = 0; j < w; ++j) acc[j] = 0.0;
        for (size_t r = 0; r < rows; ++r) {
            const T* __restrict mr = m.row(r) + c0;
#pragma omp simd
            for (size_t j = 0; j < w; ++j) acc[j] += double(mr[j]);
        }
        for (size_t j = 0; j < w; ++j) {
            double v = double(alpha) * acc[j];
            if (beta != T(0)) v += double(beta) * double(out[c0 + j]);
            out[c0 + j] = T(v);
        }
    }
}

// activation_backward, then column_sum(d, 1, 0, out), in one pass over d per block of columns
// (column_sum_block): each block's rows are taken in increasing order, the units' deltas computed
// by activation_backward_span and summed in double as they are written, which is column_sum's
// order: bit for bit the two ops, with one read of d less and one parallel region less.
// d_bf16 (nullable): the BF16 copy of each block's new deltas (d's layout), as they are summed.
template <class T>
void activation_backward_column_sum(const formulas::ActivationParams& act, CMatT<T> a,
                                    const DropoutMask* mask, MatT<T> d, T* out, int threads,
                                    uint16_t* d_bf16 = nullptr) {
    const size_t rows = d.rows, n = d.cols;
    if (n == 0) return;
    const bool masked = mask != nullptr && mask->params.p > 0.0f;
    const size_t block = column_sum_block(n, threads);
    const size_t blocks = (n + block - 1) / block;
    const bool par = blocks > 1 && parallel_worth(rows * n, threads);
    dispatch_activation(act.kind, [&](auto a_const) {
        constexpr Activation A = decltype(a_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t blk = 0; blk < blocks; ++blk) {
            const size_t c0 = blk * block, w = std::min(block, n - c0);
            const formulas::DropoutParams dp = masked ? mask->params : formulas::DropoutParams{};
            double acc[kColumnBlockMax];
            for (size_t j = 0; j < w; ++j) acc[j] = 0.0;
            for (size_t r = 0; r < rows; ++r) {
                const uint64_t ex = masked ? example_of(mask->rows, r) : 0;
                activation_backward_span<A>(act, masked, dp, ex, masked ? mask->col_offset : 0,
                                            a.row(r), d.row(r), c0, c0 + w);
                const T* __restrict dr = d.row(r) + c0;
#pragma omp simd
                for (size_t j = 0; j < w; ++j) acc[j] += double(dr[j]);
                if (d_bf16 != nullptr) write_bf16(dr, d_bf16 + r * d.ld + c0, w);
            }
            for (size_t j = 0; j < w; ++j) out[c0 + j] = T(double(T(1)) * acc[j]);
        }
    });
}

// y := alpha * x + beta * y (beta == 0 overwrites, NaNs in y included). One element per thread
// iteration, no reduction: bit-identical for any thread count.
template <class T>
void add_matrix(T alpha, CMatT<T> x, T beta, MatT<T> y, int threads) {
    const size_t rows = y.rows, n = y.cols;
    if (rows == 0 || n == 0) return;
    const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < rows; ++r) {
        const T* __restrict xr = x.row(r);
        T* __restrict yr = y.row(r);
        if (beta == T(0)) {
#pragma omp simd
            for (size_t j = 0; j < n; ++j) yr[j] = alpha * xr[j];
        } else {
#pragma omp simd
            for (size_t j = 0; j < n; ++j) yr[j] = alpha * xr[j] + beta * yr[j];
        }
    }
}

// ---- dropout ----

// One row of dropout (example ex, global column of unit 0 col0).
template <class T>
inline void dropout_row(const formulas::DropoutParams& params, uint64_t ex, uint64_t col0,
                        T* __restrict mr, size_t n) {
    const formulas::DropoutParams d = params;  // private copy: no reads through a pointer
    for (size_t j = 0; j < n; ++j) {
        const bool keep = formulas::keep_unit(d.seed, ex, col0 + j, d.p);
        mr[j] = formulas::dropout_forward(d, keep, mr[j]);
    }
}

// In place: m[r, c] := kept ? scale * m[r, c] + shift : dropped, kept iff
// keep_unit(seed, example(r), col_offset + c, p) (formulas/dropout.h). p <= 0 is a no-op.
template <class T>
void dropout(const DropoutMask& mask, MatT<T> m, int threads) {
    const formulas::DropoutParams& dp = mask.params;
    if (!(dp.p > 0.0f) || m.rows == 0 || m.cols == 0) return;
    const size_t n = m.cols;
    const bool par = parallel_worth(m.rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < m.rows; ++r)
        dropout_row(dp, example_of(mask.rows, r), mask.col_offset, m.row(r), n);
}

// bias_activation_forward, then dropout (p > 0), row by row in one parallel pass: each row is
// activated and dropped while in cache, with the two ops' row functions (bit for bit the same).
// z_bf16 (nullable): each final row's BF16 copy (after the dropout; z's layout).
template <class T>
void bias_activation_dropout(const formulas::ActivationParams& act, const T* bias,
                             const DropoutMask& mask, MatT<T> z, int threads,
                             uint16_t* z_bf16 = nullptr) {
    const size_t rows = z.rows, n = z.cols;
    if (rows == 0 || n == 0) return;
    const bool drop = mask.params.p > 0.0f;
    const bool par = parallel_worth(rows * n, threads);
    dispatch_activation(act.kind, [&](auto a_const) {
        constexpr Activation A = decltype(a_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t r = 0; r < rows; ++r) {
            formulas::ActivationParams p = act;
            p.kind = A;
            bias_activation_row<A>(p, bias, z.row(r), n);
            if (drop)
                dropout_row(mask.params, example_of(mask.rows, r), mask.col_offset, z.row(r), n);
            if (z_bf16 != nullptr) write_bf16(z.row(r), z_bf16 + r * z.ld, n);
        }
    });
}

// ---- regularisers ----

// Sparseness penalty (see Backend::sparseness_penalty). Per block of 128 columns: the column
// means in double over the rows in order, then delta += scale * beta * KL'(p, mean) on every row
// (0 where the mean is clamped). column_kl ([cols], the caller's scratch) keeps each column's KL so
// that the loss is summed in column order whatever the thread count.
template <class T>
void sparseness_penalty(float p, float beta, CMatT<T> a, T scale, MatT<T> delta, double* loss_sum,
                        std::vector<double>& column_kl, int threads) {
    constexpr size_t kBlock = 128;
    const size_t rows = a.rows, n = a.cols;
    if (rows == 0 || n == 0) return;
    grow(column_kl, n);
    double* kl = column_kl.data();
    const double pp = double(p), bb = double(beta);
    const size_t blocks = (n + kBlock - 1) / kBlock;
    const bool par = blocks > 1 && parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t blk = 0; blk < blocks; ++blk) {
        const size_t c0 = blk * kBlock, w = std::min(kBlock, n - c0);
        double acc[kBlock];
        T grad[kBlock];
        for (size_t j = 0; j < w; ++j) acc[j] = 0.0;
        for (size_t r = 0; r < rows; ++r) {
            const T* __restrict ar = a.row(r) + c0;
#pragma omp simd
            for (size_t j = 0; j < w; ++j) acc[j] += double(ar[j]);
        }
        for (size_t j = 0; j < w; ++j) {
            const double mean = acc[j] / double(rows);
            kl[c0 + j] = formulas::sparseness_kl(pp, formulas::sparseness_clamp(mean));
            grad[j] = T(double(scale) * bb * formulas::sparseness_kl_grad(pp, mean));
        }
        if (delta.data == nullptr) continue;
        for (size_t r = 0; r < rows; ++r) {
            T* __restrict dr = delta.row(r) + c0;
#pragma omp simd
            for (size_t j = 0; j < w; ++j) dr[j] += grad[j];
        }
    }
    if (loss_sum != nullptr) {
        double total = 0.0;
        for (size_t j = 0; j < n; ++j) total += kl[j];
        *loss_sum += double(rows) * bb * total;
    }
}

// DeltaNorm: rows of m longer than max_norm (L2, summed in double) are scaled to max_norm.
template <class T>
void normalize_rows(float max_norm, MatT<T> m, int threads) {
    const size_t rows = m.rows, n = m.cols;
    if (rows == 0 || n == 0) return;
    const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < rows; ++r) {
        T* __restrict mr = m.row(r);
        double norm2 = 0.0;
#pragma omp simd reduction(+ : norm2)
        for (size_t j = 0; j < n; ++j) norm2 += double(mr[j]) * double(mr[j]);
        const double f = formulas::norm_clip_factor(norm2, double(max_norm));
        if (f == 1.0) continue;
        const T ft = T(f);
#pragma omp simd
        for (size_t j = 0; j < n; ++j) mr[j] *= ft;
    }
}

// WeightNorm: columns of w longer than max_norm are scaled to max_norm. Per block of 128
// columns: squared norms in double over the rows in order, then one scaling pass.
template <class T>
void normalize_columns(float max_norm, MatT<T> w, int threads) {
    constexpr size_t kBlock = 128;
    const size_t rows = w.rows, n = w.cols;
    if (rows == 0 || n == 0) return;
    const size_t blocks = (n + kBlock - 1) / kBlock;
    const bool par = blocks > 1 && parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t blk = 0; blk < blocks; ++blk) {
        const size_t c0 = blk * kBlock, cw = std::min(kBlock, n - c0);
        double acc[kBlock];
        T factor[kBlock];
        for (size_t j = 0; j < cw; ++j) acc[j] = 0.0;
        for (size_t r = 0; r < rows; ++r) {
            const T* __restrict wr = w.row(r) + c0;
#pragma omp simd
            for (size_t j = 0; j < cw; ++j) acc[j] += double(wr[j]) * double(wr[j]);
        }
        bool any = false;
        for (size_t j = 0; j < cw; ++j) {
            factor[j] = T(formulas::norm_clip_factor(acc[j], double(max_norm)));
            any = any || factor[j] != T(1);
        }
        if (!any) continue;
        for (size_t r = 0; r < rows; ++r) {
            T* __restrict wr = w.row(r) + c0;
#pragma omp simd
            for (size_t j = 0; j < cw; ++j) wr[j] *= factor[j];
        }
    }
}

// ---- row statistics of a layer split by columns (model parallelism) ----
// A local partial per row, an all-reduce by the caller, then an apply pass (Backend::row_max
// and the ops after it). One thread per row, a fixed order within the row: bit-identical for
// any thread count.

// Max of x[0..n) ignoring NaNs ("v > max ? v : max"); -inf when no entry is a number. Sixteen
// running maxima so the loop vectorises; max is exact, so the grouping does not change the
// result (except the sign of a zero maximum when both +0 and -0 occur).
template <class T>
inline T row_max_of(const T* __restrict x, size_t n) {
    constexpr size_t kLanes = 16;
    const T lowest = -std::numeric_limits<T>::infinity();
    T lane[kLanes];
    for (size_t l = 0; l < kLanes; ++l) lane[l] = lowest;
    size_t j = 0;
    for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
        for (size_t l = 0; l < kLanes; ++l) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
    }
    for (; j < n; ++j) lane[0] = x[j] > lane[0] ? x[j] : lane[0];
    T mx = lowest;
    for (size_t l = 0; l < kLanes; ++l) mx = lane[l] > mx ? lane[l] : mx;
    return mx;
}

// out[r] = max over j of m[r, j], NaNs ignored; -inf for an empty (or all-NaN) row.
template <class T>
void row_max(CMatT<T> m, T* out, int threads) {
    const size_t rows = m.rows, n = m.cols;
    const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < rows; ++r) out[r] = row_max_of(m.row(r), n);
}

// In place: m[r, j] := exp(m[r, j] - shift[r]); row_sum[r] = the new row's sum (double, stored
// as T). The same loops as softmax_row, so that shift = the row max gives its exp values.
template <class T>
void exp_rows(const T* shift, MatT<T> m, T* row_sum, int threads) {
    const size_t rows = m.rows, n = m.cols;
    const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < rows; ++r) {
        T* __restrict z = m.row(r);
        const T mx = shift[r];
#pragma omp simd
        for (size_t j = 0; j < n; ++j) z[j] = formulas::sn_exp(z[j] - mx);
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (size_t j = 0; j < n; ++j) sum += double(z[j]);
        row_sum[r] = T(sum);
    }
}

// In place: m[r, j] := m[r, j] / divisor[r].
template <class T>
void divide_rows(const T* divisor, MatT<T> m, int threads) {
    const size_t rows = m.rows, n = m.cols;
    if (n == 0) return;
    const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < rows; ++r) {
        T* __restrict z = m.row(r);
        const T d = divisor[r];
#pragma omp simd
        for (size_t j = 0; j < n; ++j) z[j] = z[j] / d;
    }
}

// out[r] = sum over j of m[r, j]^2, in double (as normalize_rows), stored as T.
template <class T>
void row_sum_squares(CMatT<T> m, T* out, int threads) {
    const size_t rows = m.rows, n = m.cols;
    const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < rows; ++r) {
        const T* __restrict mr = m.row(r);
        double norm2 = 0.0;
#pragma omp simd reduction(+ : norm2)
        for (size_t j = 0; j < n; ++j) norm2 += double(mr[j]) * double(mr[j]);
        out[r] = T(norm2);
    }
}

// The sum of the squares of every element of m (Backend::sum_squares): chunks of
// formulas::kSumSquaresChunk elements in row-major order, each summed in double in order, then
// the chunks' sums in order.
template <class T>
T sum_squares(CMatT<T> m, int threads) {
    const size_t n = m.cols, total = m.rows * n;
    if (total == 0) return T(0);
    constexpr size_t kChunk = size_t(formulas::kSumSquaresChunk);
    const size_t chunks = (total + kChunk - 1) / kChunk;
    std::vector<double> partial(chunks);
    const bool par = parallel_worth(total, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t c = 0; c < chunks; ++c) {
        const size_t end = std::min(total, (c + 1) * kChunk);
        double sum = 0.0;
        for (size_t e = c * kChunk; e < end; ++e) {
            const double v = double(m.row(e / n)[e % n]);
            sum += v * v;
        }
        partial[c] = sum;
    }
    double sum = 0.0;
    for (double p : partial) sum += p;
    return T(sum);
}

// DeltaNorm with the squared row norms given: normalize_rows' factor from sq_norm[r]; rows
// within the bound are not written.
template <class T>
void clip_rows(float max_norm, const T* sq_norm, MatT<T> m, int threads) {
    const size_t rows = m.rows, n = m.cols;
    if (n == 0) return;
    const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < rows; ++r) {
        const double f = formulas::norm_clip_factor(double(sq_norm[r]), double(max_norm));
        if (f == 1.0) continue;
        T* __restrict mr = m.row(r);
        const T ft = T(f);
#pragma omp simd
        for (size_t j = 0; j < n; ++j) mr[j] *= ft;
    }
}

// ---- optimizers ----

// One row of optimizer_update with the kind fixed at compile time (state pointers a kind does
// not use may be null: those kinds get a private dummy per element).
template <OptimizerKind K, class T>
inline void optimizer_row(const formulas::OptimizerStep& step, T* __restrict w,
                          const T* __restrict g, T* __restrict s1, T* __restrict s2, size_t n) {
    formulas::OptimizerStep p = step;
    p.kind = K;
    constexpr int slots = formulas::optimizer_state_slots(K);
    if constexpr (slots == 0) {
#pragma omp simd
        for (size_t j = 0; j < n; ++j) {
            T u1 = T(0), u2 = T(0);
            formulas::optimizer_update(p, w[j], g[j], u1, u2);
        }
    } else if constexpr (slots == 1) {
#pragma omp simd
        for (size_t j = 0; j < n; ++j) {
            T u2 = T(0);
            formulas::optimizer_update(p, w[j], g[j], s1[j], u2);
        }
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; ++j) formulas::optimizer_update(p, w[j], g[j], s1[j], s2[j]);
    }
}

template <class F>
inline void dispatch_optimizer(OptimizerKind kind, F&& f) {
    using O = OptimizerKind;
    switch (kind) {
        case O::kSgd:
            f(std::integral_constant<O, O::kSgd>{});
            return;
        case O::kMomentum:
            f(std::integral_constant<O, O::kMomentum>{});
            return;
        case O::kAdam:
            f(std::integral_constant<O, O::kAdam>{});
            return;
        case O::kNesterov:
            f(std::integral_constant<O, O::kNesterov>{});
            return;
        case O::kAdaGrad:
            f(std::integral_constant<O, O::kAdaGrad>{});
            return;
        case O::kRmsProp:
            f(std::integral_constant<O, O::kRmsProp>{});
            return;
        case O::kAdaDelta:
            f(std::integral_constant<O, O::kAdaDelta>{});
            return;
        case O::kAdamW:
            f(std::integral_constant<O, O::kAdamW>{});
            return;
    }
    internal_error("unknown optimizer kind");
}

// Dense update of w (and its state slots, laid out like w with w's ld) with gradient g.
template <class T>
void optimizer_step(const formulas::OptimizerStep& step, MatT<T> w, CMatT<T> g, T* state1,
                    T* state2, int threads, uint16_t* w_bf16 = nullptr) {
    const size_t rows = w.rows, n = w.cols;
    if (rows == 0 || n == 0) return;
    const bool par = parallel_worth(rows * n, threads);
    dispatch_optimizer(step.kind, [&](auto k_const) {
        constexpr OptimizerKind K = decltype(k_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t r = 0; r < rows; ++r) {
            const size_t off = r * w.ld;
            optimizer_row<K>(step, w.data + off, g.row(r), state1 ? state1 + off : nullptr,
                             state2 ? state2 + off : nullptr, n);
            // The BF16 copy of the row while it is in cache (Backend::optimizer_step).
            if (w_bf16 != nullptr) write_bf16(w.data + off, w_bf16 + off, n);
        }
    });
}

// Update from a row-sparse gradient (the rows grad.rows, zero elsewhere).
//  * SparseUpdate::kExact: equal to optimizer_step with the zero-filled dense gradient. When a
//    zero gradient is a no-op (formulas::zero_gradient_is_noop: SGD or AdaGrad without L1/L2)
//    only the touched rows are visited; otherwise every row is updated (untouched rows see a
//    zero gradient row: state decays, momentum keeps moving, regularisation shrinks).
//  * SparseUpdate::kLazy: only the touched rows (weights and state) are updated.
//  * clock.last != nullptr (kExact, Momentum or Nesterov without L1): only the touched rows,
//    each first caught up to step clock.now - 1 (catch_up_rows), then updated; their clock
//    becomes clock.now.
template <class T>
void optimizer_step_rows(const formulas::OptimizerStep& step, MatT<T> w, const RowGradT<T>& grad,
                         T* state1, T* state2, SparseUpdate mode, RowClock clock,
                         RowsStepScratch<T>& scratch, int threads) {
    const size_t rows = w.rows, n = w.cols;
    const size_t count = *grad.count;
    check(count <= grad.capacity, "optimizer_step_rows", "row count exceeds the capacity");
    if (rows == 0 || n == 0) return;
    for (size_t i = 0; i < count; ++i)
        check(grad.rows[i] < rows, "optimizer_step_rows", "gradient row id out of range");

    if (clock.last != nullptr) {
        for (size_t i = 0; i < count; ++i)
            check(clock.last[grad.rows[i]] < clock.now, "optimizer_step_rows",
                  "a row clock is ahead of the step");
        const bool par = parallel_worth(count * n, threads);
        dispatch_optimizer(step.kind, [&](auto k_const) {
            constexpr OptimizerKind K = decltype(k_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
            for (size_t i = 0; i < count; ++i) {
                const uint32_t r = grad.rows[i];
                const size_t off = size_t(r) * w.ld;
                const uint32_t skipped = clock.now - 1 - clock.last[r];
                if (skipped > 0) {
                    const formulas::CatchUp c = formulas::catch_up_coefficients(step, skipped);
                    for (size_t j = 0; j < n; ++j)
                        formulas::catch_up_element(c, w.data[off + j], state1[off + j]);
                }
                optimizer_row<K>(step, w.data + off, grad.values + i * n, state1 + off,
                                 state2 ? state2 + off : nullptr, n);
                clock.last[r] = clock.now;
            }
        });
        return;
    }

    if (mode == SparseUpdate::kLazy || formulas::zero_gradient_is_noop(step)) {
        const bool par = parallel_worth(count * n, threads);
        dispatch_optimizer(step.kind, [&](auto k_const) {
            constexpr OptimizerKind K = decltype(k_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
            for (size_t i = 0; i < count; ++i) {
                const size_t off = size_t(grad.rows[i]) * w.ld;
                optimizer_row<K>(step, w.data + off, grad.values + i * n,
                                 state1 ? state1 + off : nullptr, state2 ? state2 + off : nullptr,
                                 n);
            }
        });
        return;
    }

    constexpr uint32_t kNone = UINT32_MAX;
    grow(scratch.row_map, rows, kNone);
    grow(scratch.zero_row, n, T(0));
    uint32_t* map = scratch.row_map.data();
    for (size_t i = 0; i < count; ++i) map[grad.rows[i]] = uint32_t(i);
    const T* zero = scratch.zero_row.data();
    const bool par = parallel_worth(rows * n, threads);
    dispatch_optimizer(step.kind, [&](auto k_const) {
        constexpr OptimizerKind K = decltype(k_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t r = 0; r < rows; ++r) {
            const size_t off = r * w.ld;
            const uint32_t i = map[r];
            const T* g = i == kNone ? zero : grad.values + size_t(i) * n;
            optimizer_row<K>(step, w.data + off, g, state1 ? state1 + off : nullptr,
                             state2 ? state2 + off : nullptr, n);
        }
    });
    for (size_t i = 0; i < count; ++i) map[grad.rows[i]] = kNone;
}

// The closed-form catch-up (Backend::catch_up_rows): rows of x (each once: a serial pass over
// the batch's entries lists the rows behind and moves their clocks, so duplicates are skipped),
// or every row when x is null. `behind` is scratch.
template <class T>
void catch_up_rows(const formulas::OptimizerStep& step, MatT<T> w, const CsrT<T>* x, T* state1,
                   RowClock clock, std::vector<uint64_t>& behind, int threads) {
    const size_t rows = w.rows, n = w.cols;
    if (rows == 0) return;
    const auto apply = [&](uint32_t r, uint32_t skipped) {
        const formulas::CatchUp c = formulas::catch_up_coefficients(step, skipped);
        const size_t off = size_t(r) * w.ld;
        for (size_t j = 0; j < n; ++j)
            formulas::catch_up_element(c, w.data[off + j], state1[off + j]);
    };
    if (x == nullptr) {
        for (size_t r = 0; r < rows; ++r)
            check(clock.last[r] <= clock.now, "catch_up_rows", "a row clock is ahead of the step");
        const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t r = 0; r < rows; ++r) {
            const uint32_t skipped = clock.now - clock.last[r];
            if (skipped > 0) apply(uint32_t(r), skipped);
            clock.last[r] = clock.now;
        }
        return;
    }
    behind.clear();
    for (size_t b = 0; b < x->batch; ++b) {
        for (uint64_t e = x->begin(b); e < x->end(b); ++e) {
            const uint32_t r = x->indices[e];
            check(r < rows, "catch_up_rows", "row id out of range");
            const uint32_t last = clock.last[r];
            check(last <= clock.now, "catch_up_rows", "a row clock is ahead of the step");
            if (last == clock.now) continue;
            behind.push_back(uint64_t(r) << 32 | uint64_t(clock.now - last));
            clock.last[r] = clock.now;
        }
    }
    const size_t count = behind.size();
    const bool par = parallel_worth(count * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t i = 0; i < count; ++i)
        apply(uint32_t(behind[i] >> 32), uint32_t(behind[i] & 0xffffffffu));
}

}  // namespace sparsenet::cpu
