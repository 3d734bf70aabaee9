// The emulated BF16 GEMM (bf16_matmul.h's kEmulation): c = alpha * op(a) . op(b) + beta * c on
// the BF16 roundings of a and b, with FP32 products and sums, on the FP32 sgemm. Every CPU runs
// it; it is the tests' oracle for oneDNN's matmul, and the kernel of CPUs whose BF16 instructions
// are slower than their FP32 FMAs.
//
// Why in blocks: each operand is widened from its BF16 copy (or rounded from its FP32 values)
// into floats the sgemm can read. Widening a whole 1,024 x 27,278 weight matrix writes 112 MB to
// memory and the sgemm reads it back; dsstne-bench's bf16 epoch then spent 6.2 s in GEMMs against
// FP32's 4.7 (Intel Xeon, AMX masked off, 2 threads). So the largest of m, n and k is cut into
// blocks whose widened panels (kPanelFloats) stay in the caches, one sgemm per block, and the
// other operand, when it is not cut, is widened once.
//
// Summation order: cutting k sums the blocks' products block by block (c := c + the next block's),
// so the result can differ from one sgemm over all of k in the last bits, as any two BLAS
// blockings do. The products themselves are exact (two BF16 values' product fits an FP32).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace sparsenet::cpu {

// Floats in one widened panel: 2 MiB, one core's L2 on the Xeons measured (docs/kernels.md).
constexpr size_t kPanelFloats = size_t(1) << 19;

// A BF16 operand: its FP32 values (m) and its BF16 copy (nullptr: none, then m is rounded).
struct Bf16Operand {
    CMatT<float> m;
    const uint16_t* copy = nullptr;
};

// Rows [r0, r0 + nr) and columns [c0, c0 + nc) of x as BF16 values in floats, into out
// (contiguous, ld = nc): widened from the copy, else rounded from the FP32 values (the same
// floats).
inline CMatT<float> bf16_panel(const Bf16Operand& x, size_t r0, size_t nr, size_t c0, size_t nc,
                               std::vector<float>& out, int threads) {
    out.resize(std::max<size_t>(out.size(), nr * nc));
    float* o = out.data();
    const bool par = threads > 1 && nr * nc >= (size_t(1) << 15);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t r = 0; r < nr; ++r) {
        float* dst = o + r * nc;
        if (x.copy != nullptr) {
            const uint16_t* src = x.copy + (r0 + r) * x.m.ld + c0;
#pragma omp simd
            for (size_t j = 0; j < nc; ++j) dst[j] = formulas::bf16_to_float(src[j]);
        } else {
            const float* src = x.m.row(r0 + r) + c0;
#pragma omp simd
            for (size_t j = 0; j < nc; ++j) dst[j] = formulas::round_bf16(src[j]);
        }
    }
    return CMatT<float>(o, nr, nc, nc);
}

// c (m x n) = alpha * op(a) . op(b) + beta * c on the BF16 values of a and b (beta == 0
// overwrites c). c_bf16 (nullable): c's BF16 copy (round_bf16_into's: laid out like c, zeros in
// [cols, ld)), written block by block while the block is in cache. sa and sb: the panels' scratch.
// panel_floats: the widened panel's size (tests cut small shapes into many blocks with less).
inline void gemm_bf16_emulated(bool trans_a, bool trans_b, float alpha, const Bf16Operand& a,
                               const Bf16Operand& b, float beta, MatT<float> c, uint16_t* c_bf16,
                               std::vector<float>& sa, std::vector<float>& sb, int threads,
                               size_t panel_floats = kPanelFloats) {
    const size_t m = c.rows, n = c.cols, k = trans_a ? a.m.rows : a.m.cols;
    // The whole of a (stored [m, k], or [k, m] transposed) or of b ([k, n], or [n, k]).
    const auto whole = [&](const Bf16Operand& x, std::vector<float>& s) {
        return bf16_panel(x, 0, x.m.rows, 0, x.m.cols, s, threads);
    };
    const auto copy_rows = [&](size_t r0, size_t nr, size_t c0, size_t nc) {
        if (c_bf16 == nullptr) return;
        const bool par = threads > 1 && nr * nc >= (size_t(1) << 15);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t r = r0; r < r0 + nr; ++r) write_bf16(c.row(r) + c0, c_bf16 + r * c.ld + c0, nc);
    };
    const auto round_up = [](size_t v) { return std::max<size_t>(16, (v + 15) / 16 * 16); };
    if (m == 0 || n == 0) return;
    if (k >= n && k >= m) {  // cut k: c := alpha op(a)[:, q] . op(b)[q, :] + (beta, then 1) c
        const size_t kb = std::min(k, round_up(panel_floats / (m + n)));
        for (size_t q = 0; q < k; q += kb) {
            const size_t nq = std::min(kb, k - q);
            const CMatT<float> pa = trans_a ? bf16_panel(a, q, nq, 0, m, sa, threads)
                                            : bf16_panel(a, 0, m, q, nq, sa, threads);
            const CMatT<float> pb = trans_b ? bf16_panel(b, 0, n, q, nq, sb, threads)
                                            : bf16_panel(b, q, nq, 0, n, sb, threads);
            gemm<float>(trans_a, trans_b, alpha, pa, pb, q == 0 ? beta : 1.0f, c, threads);
        }
        copy_rows(0, m, 0, n);
    } else if (n >= m) {  // cut n: c[:, j] = alpha op(a) . op(b)[:, j] + beta c[:, j]
        const CMatT<float> wa = whole(a, sa);
        const size_t nb = std::min(n, round_up(panel_floats / std::max<size_t>(k, 1)));
        for (size_t j = 0; j < n; j += nb) {
            const size_t nj = std::min(nb, n - j);
            const CMatT<float> pb = trans_b ? bf16_panel(b, j, nj, 0, k, sb, threads)
                                            : bf16_panel(b, 0, k, j, nj, sb, threads);
            gemm<float>(trans_a, trans_b, alpha, wa, pb, beta, MatT<float>{c.data + j, m, nj, c.ld},
                        threads);
            copy_rows(0, m, j, nj);
        }
    } else {  // cut m: c[i, :] = alpha op(a)[i, :] . op(b) + beta c[i, :]
        const CMatT<float> wb = whole(b, sb);
        const size_t mb = std::min(m, round_up(panel_floats / std::max<size_t>(k, 1)));
        for (size_t i = 0; i < m; i += mb) {
            const size_t ni = std::min(mb, m - i);
            const CMatT<float> pa = trans_a ? bf16_panel(a, 0, k, i, ni, sa, threads)
                                            : bf16_panel(a, i, ni, 0, k, sa, threads);
            gemm<float>(trans_a, trans_b, alpha, pa, wb, beta, MatT<float>{c.row(i), ni, n, c.ld},
                        threads);
            copy_rows(i, ni, 0, n);
        }
    }
    if (c_bf16 != nullptr && c.ld > n) {  // the copy's padding: zeros, as round_bf16_into writes
        for (size_t r = 0; r < m; ++r) std::fill(c_bf16 + r * c.ld + n, c_bf16 + (r + 1) * c.ld, 0);
    }
}

}  // namespace sparsenet::cpu
