// Mixed precision (--precision bf16): the BF16 rounding shared by the CPU and CUDA
// (kernels/formulas/precision.h), the fp16 conversions of the CPU's fp16 screen (the same file),
// the CPU's bf16 gemm against a double-precision reference of the rounded operands, and the bf16
// gemm on the device against the CPU's (parity_harness.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/precision.h"

namespace sparsenet {
namespace {

using formulas::bf16_bits;
using formulas::round_bf16;
using testing::Dense;

float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
uint32_t to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// Round to nearest even by its definition, independently of the bit trick: the two BF16 values
// around x (x's bits truncated to 16, and the next one up in magnitude), the nearer by exact
// double distance, on a tie the one whose last kept bit is 0.
uint16_t reference_bf16(float x) {
    const uint32_t u = to_bits(x);
    const uint32_t lo = u & 0xffff0000u;
    const uint32_t hi = lo + 0x10000u;  // the next BF16 in magnitude (may be infinity)
    const double dlo = std::fabs(double(x) - double(from_bits(lo)));
    const double dhi = std::isinf(from_bits(hi)) && !std::isinf(x)
                           // beyond the largest BF16: infinity is "nearer" from half an ulp on,
                           // as for a finite neighbour 2^128 (the rounding of an exponent overflow)
                           ? std::fabs(std::ldexp(1.0, 128) - std::fabs(double(x)))
                           : std::fabs(double(x) - double(from_bits(hi)));
    if (dlo < dhi) return uint16_t(lo >> 16);
    if (dhi < dlo) return uint16_t(hi >> 16);
    return ((lo >> 16) & 1u) == 0 ? uint16_t(lo >> 16) : uint16_t(hi >> 16);
}

TEST(Bf16Rounding, TiesGoToEven) {
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (BF16 keeps 7 fraction bits): 1 is even.
    EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
    // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
    EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
    // Just above the tie rounds up; just below rounds down.
    EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
              1.0f + std::ldexp(1.0f, -7));
    EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8) - std::ldexp(1.0f, -20)), 1.0f);
    // Signs are symmetric.
    EXPECT_EQ(round_bf16(-(1.0f + 3 * std::ldexp(1.0f, -8))), -(1.0f + std::ldexp(1.0f, -6)));
    // BF16 values are kept exactly.
    for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65280.0f})
        EXPECT_EQ(to_bits(round_bf16(v)), to_bits(v)) << v;
}

TEST(Bf16Rounding, InfinityNanAndOverflow) {
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(round_bf16(inf), inf);
    EXPECT_EQ(round_bf16(-inf), -inf);
    EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
    // A NaN whose payload lies only in the dropped bits: adding the rounding bias must not
    // carry it into infinity (0x7f800001 would become 0x7f80 = inf).
    EXPECT_TRUE(std::isnan(round_bf16(from_bits(0x7f800001u))));
    EXPECT_TRUE(std::isnan(round_bf16(from_bits(0xff800001u))));
    EXPECT_TRUE(std::signbit(round_bf16(from_bits(0xff800001u))));
    // FLT_MAX is beyond the largest BF16 (0x7f7f) by more than half its ulp: infinity.
    EXPECT_EQ(round_bf16(std::numeric_limits<float>::max()), inf);
    EXPECT_EQ(bf16_bits(from_bits(0x7f7f0000u)), 0x7f7fu);
    EXPECT_EQ(bf16_bits(from_bits(0x7f7f7fffu)), 0x7f7fu);  // below the tie: stays finite
    EXPECT_EQ(bf16_bits(from_bits(0x7f7f8000u)), 0x7f80u);  // tie, 0x7f7f is odd: infinity
}

TEST(Bf16Rounding, Denormals) {
    // BF16 has FP32's exponent, so FP32's denormals round within the same scale (no flush).
    EXPECT_EQ(bf16_bits(from_bits(0x00000001u)), 0x0000u);  // 2^-149: far below half of 2^-133
    EXPECT_EQ(bf16_bits(from_bits(0x00010000u)), 0x0001u);  // 2^-133: the smallest BF16, kept
    EXPECT_EQ(bf16_bits(from_bits(0x00008000u)), 0x0000u);  // tie between 0 and 2^-133: 0
    EXPECT_EQ(bf16_bits(from_bits(0x00018000u)), 0x0002u);  // tie between 1 and 2 ulps: 2
    EXPECT_EQ(bf16_bits(from_bits(0x00008001u)), 0x0001u);  // above the tie
    EXPECT_EQ(bf16_bits(from_bits(0x80018000u)), 0x8002u);  // negative
    EXPECT_EQ(bf16_bits(from_bits(0x007fffffu)), 0x0080u);  // largest denormal: up to 2^-126
}

TEST(Bf16Rounding, MatchesTheDefinitionOnRandomBitPatterns) {
    std::mt19937 rng(7);
    int checked = 0;
    for (int i = 0; i < 200000; ++i) {
        uint32_t u = rng();
        if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;  // a tie, often
        const float x = from_bits(u);
        if (std::isnan(x)) continue;
        ASSERT_EQ(bf16_bits(x), reference_bf16(x)) << std::hex << "bits 0x" << u;
        ++checked;
    }
    EXPECT_GT(checked, 190000);
}

// The value of an fp16 pattern by its definition (sign, 5-bit exponent biased 15, 10 bits).
double fp16_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double v = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1024.0 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// fp16 (the CPU's fp16 screen, src/engine/output_screen.h): by its definition, the two fp16
// values around x, the nearer by exact double distance, a tie to the even one; beyond 65504 by
// half an ulp (65520) or more, infinity.
uint16_t reference_fp16(float x) {
    const double a = std::fabs(double(x));
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (a >= 65520.0) return uint16_t(sign | 0x7c00);
    // fp16's magnitudes in increasing order are its bit patterns 0 .. 0x7bff: bisect for the
    // largest not above a.
    uint16_t lo = 0, hi = 0x7bff;
    while (lo < hi) {
        const uint16_t mid = uint16_t((lo + hi + 1) / 2);
        if (fp16_value(mid) <= a)
            lo = mid;
        else
            hi = uint16_t(mid - 1);
    }
    if (fp16_value(lo) == a) return uint16_t(sign | lo);
    const uint16_t up = uint16_t(lo + 1);  // 0x7c00 (infinity) only past 65520: excluded above
    const double dlo = a - fp16_value(lo);
    const double dup = (up == 0x7c00 ? 65536.0 : fp16_value(up)) - a;
    if (dlo < dup) return uint16_t(sign | lo);
    if (dup < dlo) return uint16_t(sign | up);
    return uint16_t(sign | ((lo & 1) == 0 ? lo : up));
}

TEST(Fp16Rounding, EveryFp16ValueByDefinitionAndBack) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = formulas::fp16_to_float(uint16_t(h));
        const int e = (h >> 10) & 0x1f;
        if (e == 0x1f) {
            ASSERT_TRUE((h & 0x3ff) ? std::isnan(f) : std::isinf(f)) << std::hex << h;
            ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
            // A NaN comes back quiet with the payload's upper bits: the same pattern, quiet bit
            // set.
            ASSERT_EQ(formulas::fp16_bits(f), (h & 0x3ff) ? (h | 0x200) : h) << std::hex << h;
            continue;
        }
        ASSERT_EQ(double(f), fp16_value(uint16_t(h))) << std::hex << h;
        ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
        ASSERT_EQ(formulas::fp16_bits(f), h) << std::hex << h;
    }
}

TEST(Fp16Rounding, TiesOverflowAndSubnormals) {
    using formulas::fp16_bits;
    EXPECT_EQ(fp16_bits(1.0f), 0x3c00);
    EXPECT_EQ(fp16_bits(1.0f + 0x1p-11f), 0x3c00);      // a tie: to the even neighbour
    EXPECT_EQ(fp16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);  // a tie: to the even neighbour
    EXPECT_EQ(fp16_bits(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
    EXPECT_EQ(fp16_bits(65504.0f), 0x7bff);
    EXPECT_EQ(fp16_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
    EXPECT_EQ(fp16_bits(65520.0f), 0x7c00);  // half an ulp over: infinity
    EXPECT_EQ(fp16_bits(-std::numeric_limits<float>::max()), 0xfc00);
    EXPECT_EQ(fp16_bits(0x1p-24f), 0x0001);  // the smallest subnormal
    EXPECT_EQ(fp16_bits(0x1p-25f), 0x0000);  // a tie with zero: zero
    EXPECT_EQ(fp16_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
    EXPECT_EQ(fp16_bits(-0x1p-26f), 0x8000);            // the sign of a zero is kept
    EXPECT_EQ(fp16_bits(3 * 0x1p-25f), 0x0002);         // a subnormal tie: to even
    EXPECT_EQ(fp16_bits(0x1p-14f - 0x1p-25f), 0x0400);  // rounds up into the normals
    EXPECT_EQ(fp16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
    EXPECT_EQ(fp16_bits(from_bits(0x7f800001u)) & 0x7e00, 0x7e00);  // a signalling NaN: quiet
    EXPECT_EQ(fp16_bits(from_bits(0xffc00000u)), 0xfe00);
}

TEST(Fp16Rounding, MatchesTheDefinitionOnRandomFloats) {
    std::mt19937 rng(11);
    int checked = 0;
    for (int i = 0; i < 200000; ++i) {
        uint32_t u = rng();
        // Most random patterns are far outside fp16's range: bring three in four inside it
        // (exponents 2^-26 .. 2^16), and one in four of those onto a tie.
        if (i % 4 != 0) u = (u & 0x807fffffu) | ((101u + rng() % 43u) << 23);
        if (i % 16 == 1) u = (u & 0xffffe000u) | 0x1000u;
        const float x = from_bits(u);
        if (std::isnan(x)) continue;
        ASSERT_EQ(formulas::fp16_bits(x), reference_fp16(x)) << std::hex << "bits 0x" << u;
        ++checked;
    }
    EXPECT_GT(checked, 190000);
}

#if defined(__x86_64__)
// F16C's conversions (vcvtps2ph with round-to-nearest-even, vcvtph2ps), compiled for F16C whatever
// the build's -march, called only where the CPU has them.
__attribute__((target("f16c"))) uint16_t f16c_bits(float x) {
    return uint16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float f16c_float(uint16_t h) {
    return _cvtsh_ss(h);
}
// CPUID leaf 1, ECX bit 29 (Clang 14's __builtin_cpu_supports does not know "f16c").
bool cpu_has_f16c() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
#endif

// The same bits as the hardware's conversion and as the compiler's _Float16 (what the fp16
// screen used before the formula: its results must not move), on every fp16 value, every tie
// and random floats, NaNs included.
TEST(Fp16Rounding, SameBitsAsF16cAndTheCompilersFloat16) {
    std::vector<float> floats;
    std::mt19937 rng(5);
    for (int i = 0; i < 1000000; ++i) floats.push_back(from_bits(rng()));
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const uint32_t u = to_bits(formulas::fp16_to_float(uint16_t(h)));
        floats.push_back(from_bits(u));
        floats.push_back(from_bits(u + 0x1000u));  // halfway to the next (normals)
        floats.push_back(from_bits(u + 0x0fffu));
        floats.push_back(from_bits(u + 0x1001u));
    }
    int compared = 0;
#if defined(__x86_64__)
    if (cpu_has_f16c()) {
        for (uint32_t h = 0; h < 0x10000; ++h)
            ASSERT_EQ(to_bits(formulas::fp16_to_float(uint16_t(h))),
                      to_bits(f16c_float(uint16_t(h))))
                << std::hex << h;
        for (float x : floats)
            ASSERT_EQ(formulas::fp16_bits(x), f16c_bits(x)) << std::hex << to_bits(x);
        ++compared;
    }
#endif
#if defined(__FLT16_MAX__)
    for (uint32_t h = 0; h < 0x10000; ++h) {
        _Float16 f;
        const uint16_t bits = uint16_t(h);
        std::memcpy(&f, &bits, sizeof f);
        ASSERT_EQ(to_bits(formulas::fp16_to_float(bits)), to_bits(static_cast<float>(f)))
            << std::hex << h;
    }
    for (float x : floats) {
        const _Float16 f = static_cast<_Float16>(x);
        uint16_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        ASSERT_EQ(formulas::fp16_bits(x), bits) << std::hex << to_bits(x);
    }
    ++compared;
#endif
    if (compared == 0) GTEST_SKIP() << "neither F16C nor the compiler's _Float16 here";
}

Dense<float> rounded(const Dense<float>& m) {
    Dense<float> r = m;
    for (size_t i = 0; i < r.rows; ++i)
        for (size_t j = 0; j < r.cols; ++j) r.at(i, j) = round_bf16(m.at(i, j));
    return r;
}

// bf16 gemm = the exact products of the BF16-rounded operands summed in FP32: against a double
// sum of those products the only error is the FP32 accumulation, at most (k + 2) u of the sum of
// |terms| (u = 2^-24; k additions, the alpha and beta roundings).
TEST(Bf16Gemm, MatchesDoubleReferenceOfRoundedOperands) {
    CpuBackend backend(2);
    backend.set_precision(Precision::kBf16);
    const float kPad = -777.0f;
    int cases = 0;
    // m = 3 takes the few-rows path, 130 OpenBLAS's sgemm.
    for (size_t m : {3, 130})
        for (size_t n : {5, 130})
            for (size_t k : {7, 300})
                for (bool ta : {false, true})
                    for (bool tb : {false, true})
                        for (float beta : {0.0f, 0.5f}) {
                            const uint64_t seed = 100 + cases++;
                            const float alpha = 0.75f;
                            const Dense<float> a = ta ? testing::random_dense<float>(k, m, 2, seed)
                                                      : testing::random_dense<float>(m, k, 2, seed);
                            const Dense<float> b =
                                tb ? testing::random_dense<float>(n, k, 1, seed + 1)
                                   : testing::random_dense<float>(k, n, 1, seed + 1);
                            Dense<float> c =
                                testing::random_dense<float>(m, n, 3, seed + 2, -1, 1, kPad);
                            const Dense<float> c0 = c;
                            backend.gemm(ta, tb, alpha, a.cview(), b.cview(), beta, c.view());
                            const Dense<float> ar = rounded(a), br = rounded(b);
                            const double u = std::ldexp(1.0, -24);
                            double worst_fp32_gap = 0;
                            for (size_t r = 0; r < m; ++r) {
                                for (size_t j = 0; j < n; ++j) {
                                    const testing::GemmReference g = testing::gemm_reference(
                                        ta, tb, alpha, ar, br, beta, c0, k, r, j);
                                    const double tol = double(k + 2) * u * g.magnitude + 1e-30;
                                    ASSERT_LE(std::fabs(c.at(r, j) - g.value), tol)
                                        << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta
                                        << " tb=" << tb << " beta=" << beta << " at " << r << ","
                                        << j;
                                    const testing::GemmReference f = testing::gemm_reference(
                                        ta, tb, alpha, a, b, beta, c0, k, r, j);
                                    worst_fp32_gap =
                                        std::max(worst_fp32_gap, std::fabs(f.value - g.value));
                                }
                                for (size_t j = n; j < c.ld; ++j) ASSERT_EQ(c.at(r, j), kPad);
                            }
                            // The operands were rounded: the result is not the FP32 product.
                            EXPECT_GT(worst_fp32_gap, 1e-4) << "m=" << m << " n=" << n;
                        }
}

// On the CPU, the emulated bf16 gemm (the oracle of oneDNN's: bf16_matmul_test.cpp) is the FP32
// gemm of the rounded operands, bit for bit (same BLAS call); tf32 computes fp32 (no TF32
// arithmetic on the CPU).
TEST(Bf16Gemm, IsTheFp32GemmOfRoundedOperandsAndTf32IsFp32) {
    CpuBackend backend(2);
    backend.set_bf16_kernel(cpu::Bf16Kernel::kEmulation);
    const Dense<float> a = testing::random_dense<float>(70, 40, 1, 1);
    const Dense<float> b = testing::random_dense<float>(40, 90, 3, 2);
    Dense<float> fp32(70, 90, 0), tf32(70, 90, 0), bf16(70, 90, 0), ref(70, 90, 0);
    backend.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.0f, fp32.view());
    backend.set_precision(Precision::kTf32);
    backend.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.0f, tf32.view());
    EXPECT_EQ(tf32.data, fp32.data);
    backend.set_precision(Precision::kBf16);
    EXPECT_EQ(backend.precision(), Precision::kBf16);
    backend.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.0f, bf16.view());
    backend.set_precision(Precision::kFp32);
    const Dense<float> ar = rounded(a), br = rounded(b);
    backend.gemm(false, false, 1.0f, ar.cview(), br.cview(), 0.0f, ref.view());
    EXPECT_EQ(bf16.data, ref.data);
    EXPECT_NE(bf16.data, fp32.data);
}

// ---- the BF16 copies of the weights (ConstMatrixView::bf16, round_bf16, optimizer_step's
// w_bf16): the engine rounds each weight matrix once per step and every GEMM reads the copy ----

std::vector<uint16_t> copy_of(const Dense<float>& m, uint16_t pad = 0) {
    std::vector<uint16_t> out(m.rows * m.ld, pad);
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t j = 0; j < m.cols; ++j) out[r * m.ld + j] = bf16_bits(m.at(r, j));
    return out;
}

TEST(Bf16Copy, RoundBf16WritesEachValuesBitsAndZerosThePadding) {
    CpuBackend backend(2);
    Dense<float> m = testing::random_dense<float>(37, 45, 3, 9, -4, 4, 0.0f);
    m.at(0, 0) = std::numeric_limits<float>::infinity();
    m.at(1, 1) = from_bits(0x3f808000u);  // a tie: to even
    std::vector<uint16_t> out(m.rows * m.ld, 0xbeef);
    backend.round_bf16(m.cview(), out.data());
    EXPECT_EQ(out, copy_of(m));
    EXPECT_EQ(out[1 * m.ld + 1], 0x3f80u);
}

// Every BF16 copy the CPU writes goes through one 16-lane loop (cpu::write_bf16) and its scalar
// tail: both give reference_bf16's bits for every class of value, NaNs (made quiet), infinities,
// denormals, ties and overflow to infinity included, at every offset of a row.
TEST(Bf16Copy, TheCopyLoopIsTheDefinitionOnEveryKindOfValue) {
    CpuBackend backend(2);
    Dense<float> m(40, 53, 11);
    std::mt19937_64 rng(17);
    const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u, 0xffbfffffu,
                                0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u, 0x7f7fffffu,
                                0x7f7f8000u, 0x00008000u, 0x00018000u, 0u,          0x80000000u};
    size_t i = 0;
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t j = 0; j < m.cols; ++j, ++i)
            m.at(r, j) =
                from_bits(i % 3 == 0 ? special[(i / 3) % std::size(special)] : uint32_t(rng()));
    std::vector<uint16_t> out(m.rows * m.ld, 0xbeef);
    backend.round_bf16(m.cview(), out.data());
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t j = 0; j < m.ld; ++j) {
            const float v = m.at(r, j);
            const uint16_t want = j >= m.cols     ? 0
                                  : std::isnan(v) ? uint16_t((to_bits(v) >> 16) | 0x40u)
                                                  : reference_bf16(v);
            ASSERT_EQ(out[r * m.ld + j], want) << r << "," << j << " bits " << to_bits(v);
        }
}

// A GEMM that reads an operand's copy computes what it computes rounding the FP32 operand
// itself, bit for bit (the CPU widens the copy: the same floats into the same sgemm), with the
// FP32 data absent too (a network that keeps only the BF16 weights).
TEST(Bf16Copy, GemmReadsTheCopyBitForBitWithOrWithoutTheFp32Data) {
    CpuBackend backend(2);
    backend.set_precision(Precision::kBf16);
    for (size_t m : {2, 70})  // the few-rows path and OpenBLAS
        for (bool ta : {false, true})
            for (bool tb : {false, true}) {
                const size_t k = 33, n = 50;
                const Dense<float> a = ta ? testing::random_dense<float>(k, m, 2, 3)
                                          : testing::random_dense<float>(m, k, 2, 3);
                const Dense<float> b = tb ? testing::random_dense<float>(n, k, 5, 4)
                                          : testing::random_dense<float>(k, n, 5, 4);
                const std::vector<uint16_t> a16 = copy_of(a), b16 = copy_of(b);
                Dense<float> want(m, n, 1), with_copies(m, n, 1), only_copies(m, n, 1);
                backend.gemm(ta, tb, 0.5f, a.cview(), b.cview(), 0.0f, want.view());
                ConstMatrixView av = a.cview(), bv = b.cview();
                av.bf16 = a16.data();
                bv.bf16 = b16.data();
                backend.gemm(ta, tb, 0.5f, av, bv, 0.0f, with_copies.view());
                EXPECT_EQ(with_copies.data, want.data) << "m=" << m << " ta=" << ta << " tb=" << tb;
                bv.data = nullptr;
                backend.gemm(ta, tb, 0.5f, a.cview(), bv, 0.0f, only_copies.view());
                EXPECT_EQ(only_copies.data, want.data) << "m=" << m << " ta=" << ta << " tb=" << tb;
            }
    // FP32 ignores a copy and reads the FP32 values.
    backend.set_precision(Precision::kFp32);
    const Dense<float> a = testing::random_dense<float>(4, 6, 0, 5);
    const Dense<float> b = testing::random_dense<float>(6, 3, 0, 6);
    const std::vector<uint16_t> b16 = copy_of(b);
    Dense<float> plain(4, 3), with_copy(4, 3);
    backend.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.0f, plain.view());
    ConstMatrixView bv = b.cview();
    bv.bf16 = b16.data();
    backend.gemm(false, false, 1.0f, a.cview(), bv, 0.0f, with_copy.view());
    EXPECT_EQ(with_copy.data, plain.data);
}

formulas::OptimizerStep a_step(OptimizerKind kind) {
    formulas::OptimizerStep step;
    step.kind = kind;
    step.learning_rate = 0.01f;
    step.mu = 0.9f;
    step.mu1 = 0.999f;
    step.epsilon = 1e-7f;
    step.l2 = 0.001f;
    step.bias_correction1 = 10.0f;
    step.bias_correction2 = 1000.0f;
    return step;
}

// optimizer_step with w_bf16: the weights and state are those of the step without it, and the
// copy holds the rounding of the new weights; its padding is not written.
TEST(Bf16Copy, OptimizerStepWritesTheCopyOfTheNewWeightsInItsPass) {
    CpuBackend backend(2);
    for (int kind = 0; kind <= int(OptimizerKind::kAdamW); ++kind) {
        const formulas::OptimizerStep step = a_step(OptimizerKind(kind));
        const Dense<float> w0 = testing::random_dense<float>(40, 70, 2, 11);
        const Dense<float> g = testing::random_dense<float>(40, 70, 2, 12);
        const Dense<float> s0 = testing::random_dense<float>(40, 70, 2, 13, 0.0, 1.0);
        Dense<float> w1 = w0, w2 = w0, a1 = s0, a2 = s0, b1 = s0, b2 = s0;
        backend.optimizer_step(step, w1.view(), g.cview(), a1.data.data(), b1.data.data());
        std::vector<uint16_t> copy(w0.rows * w0.ld, 0x7777);
        backend.optimizer_step(step, w2.view(), g.cview(), a2.data.data(), b2.data.data(),
                               copy.data());
        EXPECT_EQ(w2.data, w1.data) << to_string(OptimizerKind(kind));
        EXPECT_EQ(a2.data, a1.data);
        EXPECT_EQ(b2.data, b1.data);
        EXPECT_EQ(copy, copy_of(w1, 0x7777)) << to_string(OptimizerKind(kind));
    }
}

TEST(Precision, ParsesTheCliSpellings) {
    EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
    EXPECT_EQ(parse_precision("FP32"), Precision::kFp32);
    EXPECT_EQ(parse_precision("tf32"), Precision::kTf32);
    for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16})
        EXPECT_EQ(parse_precision(to_string(p)), p);
    try {
        parse_precision("fp16");
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find("'fp16'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("fp32, tf32 or bf16"), std::string::npos);
    }
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the bf16 gemm on the device against the CPU's emulation ----
namespace sparsenet::parity {
namespace {

// Both compute the exact products of the same BF16 values and sum them in FP32 in different
// orders (cuBLAS's tensor-core tiles, OpenBLAS's kernels): each is within (k + 2) u of the sum of
// |terms| from the exact sum, so they differ by at most 2 (k + 2) u = 6.2e-5 for k = 513; the
// tolerance 1e-4 of the sum of |terms| is the FP32 GEMM's. (No BF16 denormals here: cuBLAS may
// flush them.)
TEST_F(CudaParity, GemmBf16EveryTransposeAndShape) {
    struct Shape {
        size_t m, n, k;
    };
    struct Restore {  // the device backend is shared by the suite's tests
        Backend& b;
        Precision p;
        ~Restore() { b.set_precision(p); }
    } restore{dev(), dev().precision()};
    dev().set_precision(Precision::kBf16);
    cpu_.set_precision(Precision::kBf16);
    int cases = 0;
    for (const Shape s : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{64, 130, 33}, Shape{300, 70, 513},
                          Shape{3, 600, 27}})
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (float beta : {0.0f, 0.5f}) {
                    const uint64_t seed = uint64_t(++cases) * 17;
                    if (!sampled(uint64_t(cases))) continue;
                    const Dense<float> a = ta ? testing::random_dense<float>(s.k, s.m, 2, seed)
                                              : testing::random_dense<float>(s.m, s.k, 2, seed);
                    const Dense<float> b = tb ? testing::random_dense<float>(s.n, s.k, 1, seed + 1)
                                              : testing::random_dense<float>(s.k, s.n, 1, seed + 1);
                    Dense<float> c =
                        testing::random_dense<float>(s.m, s.n, 3, seed + 2, -1, 1, kPad);
                    DevMat ad(dev(), a), bd(dev(), b), cd(dev(), c);
                    dev().gemm(ta, tb, 0.9f, ad.cview(), bd.cview(), beta, cd.view());
                    const Dense<float> got = cd.get(c);
                    Dense<float> want = c;
                    cpu_.gemm(ta, tb, 0.9f, a.cview(), b.cview(), beta, want.view());
                    Dense<float> mag = c;
                    for (size_t r = 0; r < s.m; ++r)
                        for (size_t j = 0; j < s.n; ++j)
                            mag.at(r, j) = beta == 0.0f ? 0.0f : std::fabs(beta * c.at(r, j));
                    const Dense<float> aa = abs_of(a), ba = abs_of(b);
                    cpu_.set_precision(Precision::kFp32);
                    cpu_.gemm(ta, tb, 0.9f, aa.cview(), ba.cview(), 1.0f, mag.view());
                    cpu_.set_precision(Precision::kBf16);
                    ASSERT_TRUE(close_by_magnitude(want, got, mag, 1e-4))
                        << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta
                        << " tb=" << tb << " beta=" << beta;
                }
}

// The device's copy of a matrix is the CPU's bit for bit (the same formula, no arithmetic).
TEST_F(CudaParity, RoundBf16IsTheCpusBits) {
    Dense<float> m = testing::random_dense<float>(130, 67, 5, 21, -3, 3, 0.0f);
    m.at(2, 3) = -std::numeric_limits<float>::infinity();
    DevMat md(dev(), m);
    const size_t n = m.rows * m.ld;
    DeviceArray<uint16_t> out = dev_array(dev(), std::vector<uint16_t>(n, 0x5555), "copy");
    dev().round_bf16(md.cview(), out.data());
    std::vector<uint16_t> want(n, 0x5555);
    cpu_.round_bf16(m.cview(), want.data());
    EXPECT_EQ(fetch(out, n), want);
}

// A BF16 GEMM reading the weights' copy (laid out with the weights' padded ld) on the device
// against the CPU's emulation: the tolerance of GemmBf16EveryTransposeAndShape above.
TEST_F(CudaParity, GemmBf16ReadsTheWeightCopy) {
    struct Restore {
        Backend& b;
        Precision p;
        ~Restore() { b.set_precision(p); }
    } restore{dev(), dev().precision()};
    dev().set_precision(Precision::kBf16);
    cpu_.set_precision(Precision::kBf16);
    int cases = 0;
    for (bool tb : {false, true})
        for (size_t k : {16, 70}) {
            const size_t m = 33, n = 48;
            ++cases;
            const Dense<float> a = testing::random_dense<float>(m, k, 0, 31 + cases);
            // The engine's layout: rows padded to a multiple of 16 floats, zeros there.
            const size_t cols = tb ? k : n, rows = tb ? n : k;
            const size_t ld = (cols + 15) / 16 * 16;
            const Dense<float> b =
                testing::random_dense<float>(rows, cols, ld - cols, 41 + cases, -1, 1, 0.0f);
            DevMat ad(dev(), a), bd(dev(), b);
            const size_t nb = b.rows * b.ld;
            DeviceArray<uint16_t> b16 = dev_array(dev(), std::vector<uint16_t>(nb, 0), "copy");
            dev().round_bf16(bd.cview(), b16.data());
            Dense<float> c(m, n, 0), want(m, n, 0);
            DevMat cd(dev(), c);
            ConstMatrixView bv(nullptr, b.rows, b.cols, b.ld, /*padded=*/true, b16.data());
            dev().gemm(false, tb, 1.0f, ad.cview(), bv, 0.0f, cd.view());
            const Dense<float> got = cd.get(c);
            cpu_.gemm(false, tb, 1.0f, a.cview(), b.cview(), 0.0f, want.view());
            Dense<float> mag(m, n, 0);
            const Dense<float> aa = abs_of(a), ba = abs_of(b);
            cpu_.set_precision(Precision::kFp32);
            cpu_.gemm(false, tb, 1.0f, aa.cview(), ba.cview(), 0.0f, mag.view());
            cpu_.set_precision(Precision::kBf16);
            ASSERT_TRUE(close_by_magnitude(want, got, mag, 1e-4)) << "tb=" << tb << " k=" << k;
        }
}

// optimizer_step's copy on the device is the rounding of the device's own new weights, exactly
// (the weights themselves follow the optimizer parity tests' tolerance: optimizer_test.cpp).
TEST_F(CudaParity, OptimizerStepWritesTheBf16CopyOfItsWeights) {
    for (OptimizerKind kind :
         {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam}) {
        const formulas::OptimizerStep step = [&] {
            formulas::OptimizerStep s;
            s.kind = kind;
            s.learning_rate = 0.01f;
            s.mu = 0.9f;
            s.mu1 = 0.999f;
            s.epsilon = 1e-7f;
            s.bias_correction1 = 10.0f;
            s.bias_correction2 = 1000.0f;
            return s;
        }();
        const Dense<float> w = testing::random_dense<float>(50, 70, 10, 51);
        const Dense<float> g = testing::random_dense<float>(50, 70, 10, 52);
        const Dense<float> s0 = testing::random_dense<float>(50, 70, 10, 53, 0.0, 1.0);
        DevMat wd(dev(), w), gd(dev(), g), s1(dev(), s0), s2(dev(), s0);
        const size_t n = w.rows * w.ld;
        DeviceArray<uint16_t> copy = dev_array(dev(), std::vector<uint16_t>(n, 0x1234), "copy");
        dev().optimizer_step(step, wd.view(), gd.cview(), s1.buf.data(), s2.buf.data(),
                             copy.data());
        const Dense<float> w_new = wd.get(w);
        std::vector<uint16_t> want(n, 0x1234);
        for (size_t r = 0; r < w.rows; ++r)
            for (size_t j = 0; j < w.cols; ++j)
                want[r * w.ld + j] = formulas::bf16_bits(w_new.at(r, j));
        EXPECT_EQ(fetch(copy, n), want) << to_string(kind);
    }
}

}  // namespace
}  // namespace sparsenet::parity
