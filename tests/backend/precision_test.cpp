// Mixed precision (--precision bf16): the BF16 rounding shared by the CPU and CUDA
// (kernels/formulas/precision.h), the CPU's bf16 gemm against a double-precision reference of the
// rounded operands, and the bf16 gemm on the device against the CPU's (parity_harness.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

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

// On the CPU, bf16 gemm is the FP32 gemm of the rounded operands, bit for bit (same BLAS call);
// tf32 computes fp32 (no TF32 arithmetic on the CPU).
TEST(Bf16Gemm, IsTheFp32GemmOfRoundedOperandsAndTf32IsFp32) {
    CpuBackend backend(2);
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

}  // namespace
}  // namespace sparsenet::parity
