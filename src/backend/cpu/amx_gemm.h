// The weight gradient of a wide layer on Intel AMX tiles, with the update and the BF16 copy of the
// result fused into it (docs/kernels.md, "The weight gradient on AMX"):
//
//   c[m, n] := alpha * a^T . b + beta * c      a: [k, m] BF16, b: [k, n] BF16, c: [m, n] FP32
//   c_bf16  := bf16(c) where c_bf16 is not null (c's layout; formulas::bf16_bits of each value)
//
// In a --precision bf16 step this is the output layer's fused SGD update, W := W - lr h^T . dz,
// which also writes the BF16 copy of W that the next forward and input-delta GEMMs read.
//
// Why a kernel of our own: at dsstne-bench's shape (1024 x 27,278 x 256) the update is bound by
// memory, not by the tiles: c is read and written once (224 MB) and its copy written (56 MB),
// while the products are 14 GFLOP, a few ms of AMX. oneDNN 2.6's matmul then a separate copy
// pass moved c three times and the copy once; here each 32 x 1,024 block of c is finished in
// tiles, then read, updated and rounded into the copy in one pass while its rows are in cache.
// Measured on 2 cores of an Intel Xeon with AMX (2026-12-02, a slow hour of that VM, alternated):
// a standalone program 23-25 ms against oneDNN's 30-33 plus the copy's 9-10; without the copy
// (sparsenet_bench_bf16_matmul) 20-30 ms against 45-63; dsstne-bench's bf16 epoch 1.17x faster
// (docs/benchmarks.md).
//
// The products are those of every BF16 kernel (exact in FP32); the sums run in another order
// (32 products per tile step, then across steps), and AMX flushes denormal products to zero: the
// same bound as oneDNN's matmul against the emulation (AmxGemm.* in
// tests/backend/bf16_matmul_test.cpp).
//
// Shapes: any m, n, k >= 1 (the tiles' edges padded with zeros in scratch); a, b and c with any
// leading dimension; c's columns [n, ldc) are not written, c_bf16's are set to zero (as
// round_bf16 does). beta == 0 does not read c. Wide n is what pays: amx_gemm_tn_worth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sparsenet::cpu {

// LDTILECFG's 64-byte operand: palette 1, then each tile's bytes per row and rows.
struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

// Whether this CPU has AMX-BF16 and the kernel granted this process the tile state (Linux's
// arch_prctl(ARCH_REQ_XCOMP_PERM)); asked once. False on every other CPU and OS.
bool amx_available();

// Columns of b packed per task: a task packs its b panel ([k, 1024] BF16, 512 KB at k = 256)
// into the tiles' pair-interleaved layout once and reuses it for every 32 rows of c.
constexpr size_t kAmxPanel = 1024;

// Whether the shape has enough panels for every thread (the hidden layers' 1024-wide gradients
// stay on oneDNN, which splits them across threads another way).
inline bool amx_gemm_tn_worth(size_t m, size_t n, size_t k, int threads) {
    const size_t t = threads > 1 ? size_t(threads) : 1;
    return m >= 32 && k >= 32 && n >= 4 * t * kAmxPanel;
}

// Scratch reused between calls (grown, never shrunk): a^T packed, and per thread a b panel and a
// 32 x kAmxPanel block of sums.
struct AmxScratch {
    std::vector<uint16_t> at;
    std::vector<uint16_t> panels;
    std::vector<float> sums;
};

// The operation above with `threads` OpenMP threads. Error(kInternal) where !amx_available().
void amx_gemm_tn(size_t m, size_t n, size_t k, float alpha, const uint16_t* a, size_t lda,
                 const uint16_t* b, size_t ldb, float beta, float* c, size_t ldc, uint16_t* c_bf16,
                 AmxScratch& scratch, int threads);

}  // namespace sparsenet::cpu
