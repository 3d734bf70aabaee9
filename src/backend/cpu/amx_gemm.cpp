#include "backend/cpu/amx_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_ops.h"  // write_bf16: the one loop of every BF16 copy
#include "sparsenet/error.h"

// The tile instructions are compiled for this file's functions only (a target attribute, so a
// build for a generic x86-64 has them too) and run only where amx_available() says so.
#if defined(__x86_64__) && defined(__linux__) && \
    ((defined(__GNUC__) && __GNUC__ >= 11) || (defined(__clang__) && __clang_major__ >= 12))
#define SPARSENET_AMX_KERNEL 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace sparsenet::cpu {

#if defined(SPARSENET_AMX_KERNEL)

namespace {

constexpr size_t kTileRows = 16;   // rows of every tile
constexpr size_t kTileK = 32;      // BF16 values along k per tile step (64 bytes)
constexpr size_t kBlockRows = 32;  // rows of c per block: two tiles
constexpr size_t kBlockCols = 32;  // columns of c per block: two tiles

bool ask_for_tiles() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = (edx >> 22) & 1u, amx_tile = (edx >> 24) & 1u;
    if (!amx_bf16 || !amx_tile) return false;
    // The OS must enable the tile state in XCR0 (bits 17 and 18) and grant it to this process.
    if (!((ecx >> 27) & 1u)) return false;  // OSXSAVE
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// a^T into at[mp, kp] (row stride kp), zeros beyond m and k: the A tiles' rows are rows of c.
void pack_a_transposed(size_t m, size_t k, const uint16_t* a, size_t lda, uint16_t* at, size_t mp,
                       size_t kp, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < mp; ++i) {
        uint16_t* row = at + i * kp;
        if (i >= m) {
            std::fill(row, row + kp, uint16_t(0));
            continue;
        }
        for (size_t kk = 0; kk < k; ++kk) row[kk] = a[kk * lda + i];
        std::fill(row + k, row + kp, uint16_t(0));
    }
}

// c[r, 0..nw) := alpha * s[0..nw) + beta * c[r, ...] (beta == 0 does not read c), then its copy.
void update_row(float alpha, const float* __restrict s, float beta, float* __restrict c,
                uint16_t* c_bf16, size_t nw) {
    if (beta == 0.0f) {
#pragma omp simd
        for (size_t j = 0; j < nw; ++j) c[j] = alpha * s[j];
    } else {
#pragma omp simd
        for (size_t j = 0; j < nw; ++j) c[j] = alpha * s[j] + beta * c[j];
    }
    if (c_bf16 != nullptr) write_bf16(c, c_bf16, nw);
}

// One panel of b, columns [n0, n0 + nw): b packed into the tiles' layout, then for every 32 rows
// of c the sums of the panel's 32-column blocks in tiles, stored to s, and the rows updated.
//
// panel: [nw16 / 16][kp / 2][16][2] BF16: per 16 columns, rows 2p and 2p + 1 of b interleaved
// (what TDPBF16PS reads as B: 16 rows of 16 pairs). s: [32, kAmxPanel] FP32.
__attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16"))) void panel(
    size_t m, size_t n, size_t k, float alpha, const uint16_t* at, size_t mp, size_t kp,
    const uint16_t* b, size_t ldb, float beta, float* c, size_t ldc, uint16_t* c_bf16, size_t n0,
    uint16_t* packed, float* s) {
    const size_t nw = std::min(kAmxPanel, n - n0);
    const size_t blocks = (nw + kBlockCols - 1) / kBlockCols;
    const size_t pair_rows = kp / 2;
    // Lane 2j takes b[2p, j] (lane j of the first operand), lane 2j + 1 b[2p + 1, j] (lane 32 + j:
    // lane j of the second).
    const __m512i interleave =
        _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                         37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    for (size_t q = 0; q < 2 * blocks; ++q) {
        const size_t c0 = n0 + q * kTileRows;
        const __mmask32 cols =
            c0 >= n ? 0 : (n - c0 >= 16 ? __mmask32(0xffff) : __mmask32((1u << (n - c0)) - 1));
        uint16_t* dst = packed + q * pair_rows * 32;
        for (size_t p = 0; p < pair_rows; ++p) {
            const __mmask32 lo = 2 * p < k ? cols : 0, hi = 2 * p + 1 < k ? cols : 0;
            const __m512i r0 = _mm512_maskz_loadu_epi16(lo, b + 2 * p * ldb + c0);
            const __m512i r1 = _mm512_maskz_loadu_epi16(hi, b + (2 * p + 1) * ldb + c0);
            _mm512_storeu_si512(dst + p * 32, _mm512_permutex2var_epi16(r0, interleave, r1));
        }
    }
    // Tiles 0-3: the 2 x 2 sums; 4, 5: rows of a^T; 6, 7: the panel's two 16-column blocks.
    for (size_t m0 = 0; m0 < mp; m0 += kBlockRows) {
        for (size_t blk = 0; blk < blocks; ++blk) {
            const uint16_t* b0 = packed + 2 * blk * pair_rows * 32;
            const uint16_t* b1 = b0 + pair_rows * 32;
            const uint16_t* a0 = at + m0 * kp;
            const uint16_t* a1 = a0 + kTileRows * kp;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (size_t kk = 0; kk < kp; kk += kTileK) {
                _tile_loadd(4, a0 + kk, kp * 2);
                _tile_loadd(5, a1 + kk, kp * 2);
                _tile_loadd(6, b0 + kk / 2 * 32, 64);
                _tile_loadd(7, b1 + kk / 2 * 32, 64);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            float* sb = s + blk * kBlockCols;
            const size_t stride = kAmxPanel * sizeof(float);
            _tile_stored(0, sb, stride);
            _tile_stored(1, sb + kTileRows, stride);
            _tile_stored(2, sb + kTileRows * kAmxPanel, stride);
            _tile_stored(3, sb + kTileRows * kAmxPanel + kTileRows, stride);
        }
        const size_t rows = std::min(kBlockRows, m - std::min(m, m0));
        for (size_t r = 0; r < rows; ++r) {
            const size_t off = (m0 + r) * ldc + n0;
            update_row(alpha, s + r * kAmxPanel, beta, c + off,
                       c_bf16 != nullptr ? c_bf16 + off : nullptr, nw);
        }
    }
}

__attribute__((target("amx-tile"))) void configure_tiles() {
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = kTileRows;
    }
    _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) void release_tiles() {
    _tile_release();
}

}  // namespace

bool amx_available() {
    static const bool available = ask_for_tiles();
    return available;
}

void amx_gemm_tn(size_t m, size_t n, size_t k, float alpha, const uint16_t* a, size_t lda,
                 const uint16_t* b, size_t ldb, float beta, float* c, size_t ldc, uint16_t* c_bf16,
                 AmxScratch& scratch, int threads) {
    if (!amx_available())
        throw Error(ErrorCategory::kInternal, "amx_gemm_tn: this CPU or OS has no AMX tiles");
    if (m == 0 || n == 0) return;
    const int team = std::max(threads, 1);
    const size_t mp = (m + kBlockRows - 1) / kBlockRows * kBlockRows;
    const size_t kp = (std::max<size_t>(k, 1) + kTileK - 1) / kTileK * kTileK;
    const size_t panel_values = (kAmxPanel / kTileRows) * (kp / 2) * 32;
    scratch.at.resize(std::max(scratch.at.size(), mp * kp));
    scratch.panels.resize(std::max(scratch.panels.size(), panel_values * size_t(team)));
    scratch.sums.resize(std::max(scratch.sums.size(), kBlockRows * kAmxPanel * size_t(team)));
    pack_a_transposed(m, k, a, lda, scratch.at.data(), mp, kp, team);
    const size_t panels = (n + kAmxPanel - 1) / kAmxPanel;
#pragma omp parallel num_threads(team)
    {
        const size_t t = size_t(omp_get_thread_num());
        uint16_t* packed = scratch.panels.data() + t * panel_values;
        float* s = scratch.sums.data() + t * kBlockRows * kAmxPanel;
        configure_tiles();
#pragma omp for schedule(dynamic, 1)
        for (size_t p = 0; p < panels; ++p)
            panel(m, n, k, alpha, scratch.at.data(), mp, kp, b, ldb, beta, c, ldc, c_bf16,
                  p * kAmxPanel, packed, s);
        release_tiles();
    }
    if (c_bf16 != nullptr && ldc > n) {  // round_bf16's padding: zeros
        for (size_t r = 0; r < m; ++r) std::fill(c_bf16 + r * ldc + n, c_bf16 + (r + 1) * ldc, 0);
    }
}

#else  // no AMX kernel in this build

bool amx_available() {
    return false;
}

void amx_gemm_tn(size_t, size_t, size_t, float, const uint16_t*, size_t, const uint16_t*, size_t,
                 float, float*, size_t, uint16_t*, AmxScratch&, int) {
    throw Error(ErrorCategory::kInternal, "amx_gemm_tn: this build has no AMX kernel");
}

#endif

}  // namespace sparsenet::cpu
