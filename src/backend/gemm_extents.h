// The extents a GPU GEMM runs (issue 43, item 1): host code, tested on the CPU.
//
// Why: cuBLAS picks its vectorised TF32 kernels (cutlass `align4`, 16-byte loads) only when the
// leading dimensions *and* the extents that run along a contiguous dimension are multiples of
// 4 floats. Padding the rows (engine::padded_ld: ld 27,280 for dsstne-bench's 27,278 items)
// fixed the leading dimensions, but the GEMMs still ran n = 27,278, and the three output-layer
// GEMMs of a step ran `cutlass_80_tensorop_s1688gemm_*_align1` kernels: 583 of 1,441 us per
// step on an H100 (benchmarks/results/gpu/2026-11-28-h100/profile-dsstne-bench.txt).
//
// A row-major C[m, n] = op(A)[m, k] . op(B)[k, n]. An extent may run over a view's padding only
// where it is that view's column extent and the view is zero_padded (columns [cols, ld) hold
// zeros): the extra products are 0 * x, which adds nothing to a sum of finite values, and the
// extra output columns receive alpha * 0 + beta * 0 = 0, so the padding stays zeros. Rows have
// no padding: an extent that is some operand's row count keeps its value.
//   n: C's columns, and B's columns unless B is transposed (then B's rows): extended when C and
//      B are both zero_padded and not transposed.
//   k: A's columns unless A is transposed, B's rows unless B is transposed: extended when it is
//      the column extent of both (A not transposed, B transposed) and both are zero_padded.
//   m: C's rows: never extended.
// The CPU backend runs the logical extents (OpenBLAS gains nothing from padding, and its
// results stay bit for bit those of packed rows: tests/engine/padded_ld_test.cpp); the CUDA
// backend runs these. tests/engine/gemm_shapes_test.cpp records every GEMM a training step and
// predict issue at the benchmarks' shapes and checks them.
#pragma once

#include <cstddef>

#include "views.h"

namespace sparsenet {

// Row-major extents: C[m, n] = op(A)[m, k] . op(B)[k, n].
struct GemmExtents {
    size_t m = 0;
    size_t n = 0;
    size_t k = 0;
};

// The vector width the GPU's GEMM kernels load: 4 floats (16 bytes) for FP32/TF32 operands,
// 8 values for BF16 operands.
constexpr size_t kGemmVectorFloats = 4;
constexpr size_t kGemmVectorBf16 = 8;

inline size_t round_up_to(size_t x, size_t multiple) {
    return (x + multiple - 1) / multiple * multiple;
}

// The extents of c = op(a) . op(b) that a GPU runs: the logical ones, with n and k rounded up to
// `multiple` where the rules above allow it (the views' ld bound it).
inline GemmExtents gpu_gemm_extents(bool trans_a, bool trans_b, const ConstMatrixView& a,
                                    const ConstMatrixView& b, const ConstMatrixView& c,
                                    size_t multiple) {
    GemmExtents e{c.rows, c.cols, trans_a ? a.rows : a.cols};
    const auto fits = [&](const ConstMatrixView& v, size_t extent) {
        return v.zero_padded && extent <= v.ld;
    };
    const size_t n = round_up_to(e.n, multiple);
    if (!trans_b && fits(c, n) && fits(b, n)) e.n = n;
    const size_t k = round_up_to(e.k, multiple);
    if (!trans_a && trans_b && fits(a, k) && fits(b, k)) e.k = k;
    return e;
}

}  // namespace sparsenet
