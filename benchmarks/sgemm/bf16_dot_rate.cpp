// One core's peak rate of the instructions a BF16 or FP32 GEMM can be built on: AVX-512's FP32 FMA
// (vfmadd231ps zmm: 16 multiply-adds, 32 FLOP), AVX512-BF16's dot product (vdpbf16ps zmm: 32 BF16
// multiply-adds into 16 FP32 sums, 64 FLOP) and, where the process gets AMX tiles, AMX's tile
// product (tdpbf16ps: a 16 x 32 by 32 x 16 BF16 product into 16 x 16 FP32 sums, 16,384 FLOP).
// Twenty-four independent accumulators hide the vector instructions' latency, four tiles the tile
// product's, so each loop runs at the instruction's throughput; nothing is read from memory.
//
// Why it exists: it decides whether a CPU without AMX can run BF16 GEMMs faster than FP32 ones
// (docs/kernels.md, "BF16 GEMMs on the CPU"). On the Intel Xeon measured (AMX, AVX512-BF16),
// vdpbf16ps issues half as often as the FMA, so its 64 FLOP give the FMA's rate at best:
// 118 against 238 GFLOP/s on one core. On an AMD Zen 4 (EPYC, family 25, model 17) both issue
// once a cycle: 233 against 116 (2026-12-02).
//
// It also tells what a slow hour of a shared machine is made of: the GEMM rate programs beside the
// epochs (benchmarks/bench.py) read memory, this one only the core (docs/benchmarks.md, "Slow
// hours"); bench.py records its JSON in each result file as `core_peaks`.
//
// usage: sparsenet_bench_bf16_dot [instructions=2e8]; prints one JSON line.
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "backend/cpu/amx_gemm.h"  // amx_available, TileConfig

#if defined(__x86_64__) && defined(__linux__) && \
    ((defined(__GNUC__) && __GNUC__ >= 11) || (defined(__clang__) && __clang_major__ >= 12))
#define SPARSENET_BENCH_AMX 1
#endif

namespace {

constexpr int kChains = 24;

// The accumulators summed into *sink, so that the compiler keeps the loops that fill them.
__attribute__((target("avx512f"))) void drain(const __m512 (&acc)[kChains], float* sink) {
    float lanes[16];
    for (const __m512& a : acc) {
        _mm512_storeu_ps(lanes, a);
        for (float v : lanes) *sink += v;
    }
}

__attribute__((target("avx512f"))) double fma_seconds(long n, float* sink) {
    __m512 acc[kChains];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    const __m512 x = _mm512_set1_ps(1e-9f), y = _mm512_set1_ps(1.0f);
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < n / kChains; ++i) {
#pragma GCC unroll 24
        for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(x, y, acc[j]);
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    drain(acc, sink);
    return s;
}

__attribute__((target("avx512f,avx512bf16"))) double dot_seconds(long n, float* sink) {
    __m512 acc[kChains];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0
    const __m512bh y = (__m512bh)_mm512_set1_epi16(0x3000);  // 2^-31
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < n / kChains; ++i) {
#pragma GCC unroll 24
        for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, y);
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    drain(acc, sink);
    return s;
}

#if defined(SPARSENET_BENCH_AMX)
// n tile products, four at a time into tiles 0-3 from A tiles 4-5 and B tiles 6-7 (each BF16
// 1.0 times 2^-31, so the sums stay far from overflow).
__attribute__((target("amx-tile,amx-bf16"))) double tile_seconds(long n, float* sink) {
    sparsenet::cpu::TileConfig cfg;  // every tile 16 rows of 64 bytes
    for (int t = 0; t < 8; ++t) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
    alignas(64) static uint16_t ones[16 * 32], small[16 * 32];
    alignas(64) static float sums[16 * 16];
    for (int i = 0; i < 16 * 32; ++i) {
        ones[i] = 0x3f80;
        small[i] = 0x3000;
    }
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, small, 64);
    _tile_loadd(7, small, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < n / 4; ++i) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    _tile_stored(0, sums, 64);
    _tile_release();
    *sink += sums[0];
    return s;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    const long n = argc > 1 ? long(std::atof(argv[1])) : 200000000L;
    if (!__builtin_cpu_supports("avx512f")) {
        std::printf("{\"error\": \"this CPU has no AVX-512\"}\n");
        return 1;
    }
    float sink = 0.0f;
    fma_seconds(n / 10, &sink);  // warm-up: the core's AVX-512 frequency
    const double fma = fma_seconds(n, &sink);
    std::printf("{\"instructions\": %ld, \"fma_gflops\": %.1f", n, double(n) * 32 / fma / 1e9);
    if (__builtin_cpu_supports("avx512bf16")) {
        const double dot = dot_seconds(n, &sink);
        std::printf(", \"dpbf16_gflops\": %.1f, \"dpbf16_over_fma\": %.2f",
                    double(n) * 64 / dot / 1e9, (double(n) * 64 / dot) / (double(n) * 32 / fma));
    } else {
        std::printf(", \"dpbf16_gflops\": null");
    }
#if defined(SPARSENET_BENCH_AMX)
    if (sparsenet::cpu::amx_available()) {
        const long tiles = n / 64;  // each 256 times a vdpbf16ps's work
        tile_seconds(tiles / 10, &sink);
        std::printf(", \"amx_tile_gflops\": %.1f",
                    double(tiles) * 16384 / tile_seconds(tiles, &sink) / 1e9);
    } else {
        std::printf(", \"amx_tile_gflops\": null");
    }
#else
    std::printf(", \"amx_tile_gflops\": null");
#endif
    std::printf(", \"sink\": %g}\n", double(sink));
    return 0;
}
