// One core's peak rate of the two instructions a BF16 GEMM without AMX can be built on: AVX-512's
// FP32 FMA (vfmadd231ps zmm: 16 multiply-adds, 32 FLOP) and AVX512-BF16's dot product
// (vdpbf16ps zmm: 32 BF16 multiply-adds into 16 FP32 sums, 64 FLOP). Twenty-four independent
// accumulators hide either's latency, so each loop runs at the instruction's throughput.
//
// Why it exists: it decides whether a CPU without AMX can run BF16 GEMMs faster than FP32 ones
// (docs/kernels.md, "BF16 GEMMs on the CPU"). On the Intel Xeon measured (AMX, AVX512-BF16),
// vdpbf16ps issues half as often as the FMA, so its 64 FLOP give the FMA's rate at best:
// 118 against 238 GFLOP/s on one core. On an AMD Zen 4 (EPYC, family 25, model 17) both issue
// once a cycle: 233 against 116 (2026-12-02).
//
// usage: sparsenet_bench_bf16_dot [instructions=2e8]; prints one JSON line.
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

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
    std::printf(", \"sink\": %g}\n", double(sink));
    return 0;
}
