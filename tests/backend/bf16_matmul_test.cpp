// The CPU's BF16 GEMM on oneDNN's matmul (src/backend/cpu/bf16_matmul.h) against the emulation
// (FP32 sgemm on BF16-rounded operands, the oracle) through Backend::gemm: every transpose, packed,
// zero-padded and garbage-padded leading dimensions, with and without BF16 copies, the batch shapes
// a training step and the last partial batch issue, alpha read at run time.
//
// The bound: a product of two BF16 values is exact in FP32, so the two kernels differ only in the
// order of their FP32 additions (each within (k + 2) ulps of the exact sum of |terms|: Higham's
// gamma_k), plus an absolute term because AMX flushes denormal products to zero (at most 2^-126 per
// product). So |onednn - emulation| <= 2 (k + 2) 2^-24 (|alpha| sum_i |a_i b_i| + |beta c|) +
// k 2^-126.
//
// Skipped where oneDNN cannot run BF16 matmuls (a build without it, a CPU without AVX512-BF16, or
// ONEDNN_MAX_CPU_ISA below it); fails where the CPU has AVX512-BF16, the build has oneDNN, no ISA
// is forced, and the matmul still cannot be created.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "backend/cpu/amx_gemm.h"
#include "backend/cpu/bf16_matmul.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "formulas/precision.h"

namespace sparsenet {
namespace {

using testing::Dense;

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    return __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

// Skips, or fails where oneDNN should run and does not.
#define SKIP_WITHOUT_ONEDNN()                                                                 \
    do {                                                                                      \
        if (!cpu::onednn_bf16_available()) {                                                  \
            const bool expected = cpu::built_with_onednn() && cpu_has_avx512_bf16() &&        \
                                  std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr;               \
            if (expected) FAIL() << "oneDNN should run BF16 matmuls here: " << choice_line(); \
            GTEST_SKIP() << choice_line();                                                    \
        }                                                                                     \
    } while (0)

std::string choice_line() {
    try {
        return cpu::bf16_choice().line;
    } catch (const Error& e) {
        return e.what();
    }
}

// A stored operand: its FP32 values, its BF16 copy laid out like it (when `copy`), and whether its
// padding holds zeros.
struct Operand {
    Dense<float> m;
    std::vector<uint16_t> bf16;
    bool zero_padded = false;
    ConstMatrixView view(bool with_copy) const {
        ConstMatrixView v = m.cview();
        v.zero_padded = zero_padded;
        if (with_copy) v.bf16 = bf16.data();
        return v;
    }
};

enum class Pad { kPacked, kZeros, kGarbage };

Operand make_operand(size_t rows, size_t cols, Pad pad, uint64_t seed, double scale = 1.0) {
    const size_t extra = pad == Pad::kPacked ? 0 : (8 - cols % 8) % 8 + 8;
    Operand o;
    o.m = testing::random_dense<float>(rows, cols, extra, seed, -scale, scale,
                                       pad == Pad::kGarbage ? 123.0f : 0.0f);
    o.zero_padded = pad == Pad::kZeros;
    o.bf16.assign(rows * o.m.ld + 1, 0);
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < o.m.ld; ++j)
            o.bf16[r * o.m.ld + j] = j < cols ? formulas::bf16_bits(o.m.at(r, j)) : 0;
    return o;
}

// The bound above for c[r, j]: the sum of the magnitudes of the rounded terms.
double bound(bool ta, bool tb, float alpha, const Dense<float>& a, const Dense<float>& b,
             float beta, const Dense<float>& c0, size_t k, size_t r, size_t j) {
    double mag = 0.0;
    for (size_t i = 0; i < k; ++i) {
        const float x = formulas::round_bf16(ta ? a.at(i, r) : a.at(r, i));
        const float y = formulas::round_bf16(tb ? b.at(j, i) : b.at(i, j));
        mag += std::fabs(double(x) * double(y));
    }
    mag = std::fabs(alpha) * mag + (beta == 0.0f ? 0.0 : std::fabs(double(beta) * c0.at(r, j)));
    return 2.0 * double(k + 2) * std::ldexp(1.0, -24) * mag + double(k) * std::ldexp(1.0, -126);
}

struct Shape {
    size_t m, n, k;
};

TEST(Bf16Matmul, OnednnMatchesTheEmulationForEveryLayout) {
    SKIP_WITHOUT_ONEDNN();
    CpuBackend onednn(2), emulation(2);
    onednn.set_precision(Precision::kBf16);
    emulation.set_precision(Precision::kBf16);
    onednn.set_bf16_kernel(cpu::Bf16Kernel::kOnednn);
    emulation.set_bf16_kernel(cpu::Bf16Kernel::kEmulation);
    struct Scalars {
        float alpha, beta;
    };
    // 83 columns pad to 88 (+8): the extents then run over the padding. m: a batch, its last
    // partial batch, and the few-rows path's bound plus one.
    int cases = 0;
    for (const Shape s :
         {Shape{64, 83, 40}, Shape{37, 83, 40}, Shape{5, 24, 83}, Shape{130, 96, 64}})
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (Pad pad : {Pad::kPacked, Pad::kZeros, Pad::kGarbage})
                    for (bool copies : {false, true})
                        for (const Scalars sc :
                             {Scalars{1.0f, 0.0f}, Scalars{-0.05f, 1.0f}, Scalars{0.5f, 0.25f}}) {
                            const uint64_t seed = 100 + cases++;
                            const Operand a = ta ? make_operand(s.k, s.m, pad, seed)
                                                 : make_operand(s.m, s.k, pad, seed);
                            const Operand b = tb ? make_operand(s.n, s.k, pad, seed + 1)
                                                 : make_operand(s.k, s.n, pad, seed + 1);
                            const Operand c0 = make_operand(s.m, s.n, pad, seed + 2);
                            Dense<float> c1 = c0.m, c2 = c0.m;
                            MatrixView v1 = c1.view(), v2 = c2.view();
                            v1.zero_padded = v2.zero_padded = c0.zero_padded;
                            onednn.gemm(ta, tb, sc.alpha, a.view(copies), b.view(copies), sc.beta,
                                        v1);
                            emulation.gemm(ta, tb, sc.alpha, a.view(copies), b.view(copies),
                                           sc.beta, v2);
                            for (size_t r = 0; r < s.m; ++r) {
                                for (size_t j = 0; j < s.n; ++j) {
                                    const double tol =
                                        bound(ta, tb, sc.alpha, a.m, b.m, sc.beta, c0.m, s.k, r, j);
                                    ASSERT_LE(std::fabs(double(c1.at(r, j)) - c2.at(r, j)), tol)
                                        << "m " << s.m << " n " << s.n << " k " << s.k << " ta "
                                        << ta << " tb " << tb << " pad " << int(pad) << " copies "
                                        << copies << " alpha " << sc.alpha << " beta " << sc.beta
                                        << " at " << r << "," << j;
                                }
                                // The padding: zeros stay zeros, anything else is not written.
                                for (size_t j = s.n; j < c1.ld; ++j)
                                    ASSERT_EQ(c1.at(r, j), c0.m.at(r, j)) << "padding " << r;
                            }
                        }
    EXPECT_GT(onednn.onednn_implementation().size(), 0u);
    std::printf("oneDNN implementation: %s\n", onednn.onednn_implementation().c_str());
}

// alpha is read at run time (the fused SGD step's -learning rate changes every step): one
// primitive serves every alpha, and the results scale with it.
TEST(Bf16Matmul, AlphaIsReadAtRunTime) {
    SKIP_WITHOUT_ONEDNN();
    cpu::OnednnMatmul mm;
    const size_t m = 32, n = 48, k = 64;
    std::vector<uint16_t> a(m * k), b(k * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = formulas::bf16_bits(float(int(i % 9) - 4) / 4);
    for (size_t i = 0; i < b.size(); ++i) b[i] = formulas::bf16_bits(float(int(i % 7) - 3) / 2);
    std::vector<float> one(m * n), scaled(m * n);
    mm.run(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, one.data(), 2);
    for (float alpha : {-0.25f, 2.0f, -0.001f}) {
        mm.run(false, false, m, n, k, alpha, a.data(), b.data(), 0.0f, scaled.data(), 2);
        // Small integers over powers of two: every sum is exact, so alpha's product is too
        // (alpha a power of two) or within its one rounding.
        for (size_t i = 0; i < one.size(); ++i)
            ASSERT_NEAR(scaled[i], alpha * one[i], std::fabs(alpha * one[i]) * 1e-7) << alpha;
    }
    EXPECT_EQ(mm.primitives(), 1u);
    // Whether beta is 0, 1 or another value is part of the primitive; another value is read at
    // run time (the fused SGD step's 1 - lr l2 follows the schedule): one primitive for all.
    mm.run(false, false, m, n, k, 1.0f, a.data(), b.data(), 1.0f, scaled.data(), 2);
    EXPECT_EQ(mm.primitives(), 2u);
    for (float beta : {0.5f, -0.75f, 3.0f}) {
        std::vector<float> c(m * n, 2.0f);
        mm.run(false, false, m, n, k, -0.25f, a.data(), b.data(), beta, c.data(), 2);
        for (size_t i = 0; i < c.size(); ++i)
            ASSERT_NEAR(c[i], -0.25f * one[i] + beta * 2.0f, 1e-6 * (std::fabs(one[i]) + 8))
                << beta;
    }
    EXPECT_EQ(mm.primitives(), 3u);
}

// gemm with c's BF16 copy (the fused SGD step's weights): c as gemm without the copy, the copy the
// rounding of c bit for bit, for every transpose and beta 0, 1 and another, the padding of c not
// written (or zeros over zero padding).
TEST(Bf16Matmul, GemmWritesTheCopyOfC) {
    SKIP_WITHOUT_ONEDNN();
    CpuBackend backend(2);
    backend.set_precision(Precision::kBf16);
    backend.set_bf16_kernel(cpu::Bf16Kernel::kOnednn);
    const size_t m = 48, n = 600, k = 40;
    int cases = 0;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (Pad pad : {Pad::kZeros, Pad::kGarbage})
                for (float beta : {0.0f, 1.0f, 0.95f}) {
                    const uint64_t seed = 500 + cases++;
                    const Operand a =
                        ta ? make_operand(k, m, pad, seed) : make_operand(m, k, pad, seed);
                    const Operand b =
                        tb ? make_operand(n, k, pad, seed + 1) : make_operand(k, n, pad, seed + 1);
                    const Operand c0 = make_operand(m, n, pad, seed + 2);
                    Dense<float> c1 = c0.m, c2 = c0.m;
                    MatrixView v1 = c1.view(), v2 = c2.view();
                    v1.zero_padded = v2.zero_padded = c0.zero_padded;
                    std::vector<uint16_t> copy(c1.rows * c1.ld, 0x7777);
                    backend.gemm(ta, tb, -0.05f, a.view(true), b.view(true), beta, v1, copy.data());
                    backend.gemm(ta, tb, -0.05f, a.view(true), b.view(true), beta, v2);
                    for (size_t r = 0; r < m; ++r) {
                        for (size_t j = 0; j < n; ++j) {
                            ASSERT_EQ(c1.at(r, j), c2.at(r, j))
                                << ta << tb << " beta " << beta << " at " << r << "," << j;
                            ASSERT_EQ(copy[r * c1.ld + j], formulas::bf16_bits(c1.at(r, j)));
                        }
                        for (size_t j = n; j < c1.ld; ++j) {
                            ASSERT_EQ(c1.at(r, j), c0.m.at(r, j));
                            // round_bf16's padding: zeros.
                            ASSERT_EQ(copy[r * c1.ld + j], 0u);
                        }
                    }
                }
}

// Denormal products: AMX flushes them to zero where the emulation keeps them; the bound's absolute
// term covers exactly that.
TEST(Bf16Matmul, DenormalProductsStayWithinTheAbsoluteTerm) {
    SKIP_WITHOUT_ONEDNN();
    CpuBackend onednn(2), emulation(2);
    for (CpuBackend* be : {&onednn, &emulation}) be->set_precision(Precision::kBf16);
    onednn.set_bf16_kernel(cpu::Bf16Kernel::kOnednn);
    emulation.set_bf16_kernel(cpu::Bf16Kernel::kEmulation);
    const size_t m = 16, n = 16, k = 32;
    Dense<float> a(m, k, 0, 1e-20f), b(k, n, 0, 1e-20f), c1(m, n), c2(m, n);
    onednn.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.0f, c1.view());
    emulation.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.0f, c2.view());
    const double product = double(formulas::round_bf16(1e-20f)) * formulas::round_bf16(1e-20f);
    EXPECT_NEAR(c2.at(0, 0), k * product, k * product * 1e-6);  // the emulation keeps them
    for (size_t i = 0; i < m * n; ++i)
        ASSERT_LE(std::fabs(double(c1.data[i]) - c2.data[i]), k * std::ldexp(1.0, -126));
}

// ---- amx_gemm_tn (amx_gemm.h): the weight gradient on AMX tiles, update and copy fused ----

// Skips where the CPU or OS has no AMX tiles; fails where oneDNN runs on AMX and the kernel cannot.
#define SKIP_WITHOUT_AMX()                                                                \
    do {                                                                                  \
        if (!cpu::amx_available()) {                                                      \
            if (cpu::bf16_choice().line.find(": AMX") != std::string::npos)               \
                FAIL() << "oneDNN runs on AMX but amx_gemm_tn cannot: " << choice_line(); \
            GTEST_SKIP() << "no AMX tiles here: " << choice_line();                       \
        }                                                                                 \
    } while (0)

// c = alpha a^T b + beta c against the emulation, called directly (every shape, not only the wide
// ones the backend sends it): tile edges in m, n and k (1, 15, 17, 33, 1,030 and 2,100 columns:
// a panel and a part of one), leading dimensions packed and padded, beta 0 over a c full of NaN
// (never read), 1 and another, with and without the copy (then bit for bit the rounding of c).
TEST(AmxGemm, MatchesTheEmulationAtTileEdges) {
    SKIP_WITHOUT_AMX();
    CpuBackend emulation(2);
    emulation.set_precision(Precision::kBf16);
    emulation.set_bf16_kernel(cpu::Bf16Kernel::kEmulation);
    cpu::AmxScratch scratch;
    int cases = 0;
    for (const Shape s : {Shape{1, 1, 1}, Shape{15, 17, 33}, Shape{37, 1030, 40},
                          Shape{64, 2100, 256}, Shape{33, 83, 70}})
        for (Pad pad : {Pad::kPacked, Pad::kGarbage})
            for (float beta : {0.0f, 1.0f, 0.95f}) {
                const uint64_t seed = 900 + cases++;
                const Operand a = make_operand(s.k, s.m, pad, seed);
                const Operand b = make_operand(s.k, s.n, pad, seed + 1);
                Operand c0 = make_operand(s.m, s.n, pad, seed + 2);
                if (beta == 0.0f)
                    for (size_t r = 0; r < s.m; ++r)
                        for (size_t j = 0; j < s.n; ++j)
                            c0.m.at(r, j) = std::numeric_limits<float>::quiet_NaN();
                Dense<float> c1 = c0.m, c2 = c0.m;
                std::vector<uint16_t> copy(c1.rows * c1.ld, 0x7777);
                const bool with_copy = cases % 2 == 0;
                cpu::amx_gemm_tn(s.m, s.n, s.k, -0.05f, a.bf16.data(), a.m.ld, b.bf16.data(),
                                 b.m.ld, beta, c1.data.data(), c1.ld,
                                 with_copy ? copy.data() : nullptr, scratch, 2);
                emulation.gemm(true, false, -0.05f, a.view(true), b.view(true), beta, c2.view());
                for (size_t r = 0; r < s.m; ++r) {
                    for (size_t j = 0; j < s.n; ++j) {
                        const double tol = bound(true, false, -0.05f, a.m, b.m, beta,
                                                 beta == 0.0f ? c2 : c0.m, s.k, r, j);
                        ASSERT_LE(std::fabs(double(c1.at(r, j)) - c2.at(r, j)), tol)
                            << "m " << s.m << " n " << s.n << " k " << s.k << " pad " << int(pad)
                            << " beta " << beta << " at " << r << "," << j;
                        if (with_copy) {
                            ASSERT_EQ(copy[r * c1.ld + j], formulas::bf16_bits(c1.at(r, j)));
                        }
                    }
                    for (size_t j = s.n; j < c1.ld; ++j) {
                        ASSERT_EQ(std::memcmp(&c1.at(r, j), &c0.m.at(r, j), sizeof(float)), 0)
                            << "c's padding written at " << r << "," << j;
                        if (with_copy) {
                            ASSERT_EQ(copy[r * c1.ld + j], 0u) << "copy's padding";
                        }
                    }
                }
            }
}

// Through Backend::gemm: a wide weight gradient (the fused SGD step's shape, scaled down) runs on
// the tiles when the backend's switch is on, within the bound of oneDNN's matmul, with the copy.
TEST(AmxGemm, TheBackendSendsWideWeightGradientsToIt) {
    SKIP_WITHOUT_ONEDNN();
    SKIP_WITHOUT_AMX();
    CpuBackend tiles(2), onednn(2);
    for (CpuBackend* be : {&tiles, &onednn}) {
        be->set_precision(Precision::kBf16);
        be->set_bf16_kernel(cpu::Bf16Kernel::kOnednn);
    }
    tiles.set_amx_gemm(true);
    onednn.set_amx_gemm(false);
    const size_t m = 48, n = 8300, k = 40;
    ASSERT_TRUE(cpu::amx_gemm_tn_worth(m, n, k, tiles.threads()));
    ASSERT_FALSE(cpu::amx_gemm_tn_worth(1024, 1024, 256, 2));  // a hidden layer's: oneDNN
    const Operand a = make_operand(k, m, Pad::kZeros, 1);
    const Operand b = make_operand(k, n, Pad::kZeros, 2);
    const Operand c0 = make_operand(m, n, Pad::kZeros, 3);
    Dense<float> c1 = c0.m, c2 = c0.m;
    MatrixView v1 = c1.view(), v2 = c2.view();
    v1.zero_padded = v2.zero_padded = true;
    std::vector<uint16_t> copy1(c1.rows * c1.ld, 0x7777), copy2(copy1);
    tiles.gemm(true, false, -0.01f, a.view(true), b.view(true), 1.0f, v1, copy1.data());
    onednn.gemm(true, false, -0.01f, a.view(true), b.view(true), 1.0f, v2, copy2.data());
    size_t differ = 0;
    for (size_t r = 0; r < m; ++r)
        for (size_t j = 0; j < n; ++j) {
            const double tol = 2 * bound(true, false, -0.01f, a.m, b.m, 1.0f, c0.m, k, r, j);
            ASSERT_LE(std::fabs(double(c1.at(r, j)) - c2.at(r, j)), tol) << r << "," << j;
            ASSERT_EQ(copy1[r * c1.ld + j], formulas::bf16_bits(c1.at(r, j)));
            differ += c1.at(r, j) != c2.at(r, j);
        }
    std::printf("values that differ from oneDNN's in the last bit(s): %zu of %zu\n", differ, m * n);
}

// Which GEMMs the backend sends to the tiles, at the benchmarks' shapes (a pure rule: any CPU).
// m = the layer's inputs, n = its width, k = the batch.
TEST(AmxGemm, TheBenchmarksOutputLayersGoToTheTiles) {
    for (int threads : {1, 2}) {
        EXPECT_TRUE(cpu::amx_gemm_tn_worth(1024, 27278, 256, threads));  // dsstne-bench
        EXPECT_TRUE(cpu::amx_gemm_tn_worth(600, 27278, 500, threads));   // mult-dae
        EXPECT_FALSE(cpu::amx_gemm_tn_worth(1024, 1024, 256, threads));  // their hidden layers
        EXPECT_FALSE(cpu::amx_gemm_tn_worth(200, 600, 500, threads));
    }
    // Four panels a thread: with 16 threads 27 panels of 1,024 columns are too few, and 27,278
    // items stay on oneDNN (unmeasured there); 65,536 items would go to the tiles.
    EXPECT_FALSE(cpu::amx_gemm_tn_worth(1024, 27278, 256, 16));
    EXPECT_TRUE(cpu::amx_gemm_tn_worth(1024, 65536, 256, 16));
    // 4 panels would not feed 2 threads.
    EXPECT_FALSE(cpu::amx_gemm_tn_worth(1024, 4096, 256, 2));
    EXPECT_FALSE(cpu::amx_gemm_tn_worth(16, 27278, 256, 2));  // fewer than a block of rows
}

TEST(AmxGemm, SwitchingItOnWithoutTilesIsAUsageError) {
    if (cpu::amx_available()) GTEST_SKIP() << "AMX tiles here";
    CpuBackend be(1);
    EXPECT_FALSE(be.amx_gemm());
    try {
        be.set_amx_gemm(true);
        FAIL() << "AMX kernel switched on without tiles";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    }
    cpu::AmxScratch scratch;
    EXPECT_THROW(cpu::amx_gemm_tn(1, 1, 1, 1.0f, nullptr, 1, nullptr, 1, 0.0f, nullptr, 1, nullptr,
                                  scratch, 1),
                 Error);
}

// The process's choice follows what the CPU has and names it.
TEST(Bf16Matmul, TheChoiceNamesTheKernelAndTheCpu) {
    const cpu::Bf16Choice& choice = cpu::bf16_choice();
    EXPECT_NE(choice.line.find(cpu::to_string(choice.kernel)), std::string::npos) << choice.line;
    if (choice.kernel == cpu::Bf16Kernel::kOnednn) {
        EXPECT_TRUE(cpu::onednn_bf16_available());
    }
    if (!cpu::onednn_bf16_available()) {
        EXPECT_EQ(choice.kernel, cpu::Bf16Kernel::kEmulation);
    }
    if (std::getenv("SPARSENET_CPU_BF16_KERNEL") == nullptr && cpu::onednn_bf16_available() &&
        choice.line.find("avx512_core_amx") != std::string::npos) {
        EXPECT_EQ(choice.kernel, cpu::Bf16Kernel::kOnednn) << "AMX: " << choice.line;
    }
    std::printf("%s\n", choice.line.c_str());
    CpuBackend be(1);
    EXPECT_EQ(be.bf16_kernel(), choice.kernel);
    if (!cpu::onednn_bf16_available()) {
        EXPECT_THROW(be.set_bf16_kernel(cpu::Bf16Kernel::kOnednn), Error);
    }
}

// The decision from a probe, on any CPU (choose_bf16_kernel): the branch a CPU with AVX512-BF16
// and no AMX takes (an AMD Zen 4) runs here whatever this machine has.
cpu::Bf16Probe probe_of(bool amx, double onednn_s, double emulation_s) {
    cpu::Bf16Probe p;
    p.available = true;
    p.amx = amx;
    p.isa = amx ? "avx512_core_amx" : "avx512_core_bf16";
    p.impl = amx ? "brg:avx512_core_amx_bf16" : "brg:avx512_core_bf16";
    p.onednn_s = onednn_s;
    p.emulation_s = emulation_s;
    return p;
}

TEST(Bf16Choice, WithoutAmxTheFasterKernelWinsAndBothRatesAreNamed) {
    // 512 x 1024 x 1024 is 1.07 GFLOP: 2.68 ms is 401 GFLOP/s, 5.77 ms 186.
    const cpu::Bf16Choice onednn = cpu::choose_bf16_kernel("", probe_of(false, 2.68e-3, 5.77e-3));
    EXPECT_EQ(onednn.kernel, cpu::Bf16Kernel::kOnednn);
    EXPECT_NE(onednn.line.find("-> onednn brg:avx512_core_bf16"), std::string::npos) << onednn.line;
    EXPECT_NE(onednn.line.find("ran 401 GFLOP/s"), std::string::npos) << onednn.line;
    EXPECT_NE(onednn.line.find("widened operands 186"), std::string::npos) << onednn.line;
    // The Intel Xeon with AMX masked off: oneDNN's avx512_core_bf16 below the emulation.
    const cpu::Bf16Choice emulation =
        cpu::choose_bf16_kernel("auto", probe_of(false, 4.6e-3, 3.2e-3));
    EXPECT_EQ(emulation.kernel, cpu::Bf16Kernel::kEmulation);
    EXPECT_NE(emulation.line.find("-> emulation (CPU ISA avx512_core_bf16, no AMX"),
              std::string::npos)
        << emulation.line;
    // A tie keeps the oracle.
    EXPECT_EQ(cpu::choose_bf16_kernel("", probe_of(false, 3e-3, 3e-3)).kernel,
              cpu::Bf16Kernel::kEmulation);
    // Without AMX an untimed probe is the caller's bug, never a division by zero.
    EXPECT_THROW(cpu::choose_bf16_kernel("", probe_of(false, 0, 0)), Error);
}

TEST(Bf16Choice, AmxTakesOnednnWithoutTiming) {
    const cpu::Bf16Choice c = cpu::choose_bf16_kernel("", probe_of(true, 0, 0));
    EXPECT_EQ(c.kernel, cpu::Bf16Kernel::kOnednn);
    EXPECT_TRUE(c.amx_gemm);
    EXPECT_EQ(c.line,
              "bf16 GEMMs -> onednn brg:avx512_core_amx_bf16 (CPU ISA avx512_core_amx: AMX); wide "
              "weight gradients -> amx_gemm_tn (update and copy fused)");
    // SPARSENET_CPU_AMX_GEMM=0 keeps them on oneDNN, and says so; without AMX it changes nothing.
    const cpu::Bf16Choice off = cpu::choose_bf16_kernel("", probe_of(true, 0, 0), "0");
    EXPECT_FALSE(off.amx_gemm);
    EXPECT_NE(off.line.find("wide weight gradients on onednn (SPARSENET_CPU_AMX_GEMM=0)"),
              std::string::npos)
        << off.line;
    EXPECT_FALSE(cpu::choose_bf16_kernel("", probe_of(false, 2e-3, 5e-3), "1").amx_gemm);
    EXPECT_FALSE(cpu::choose_bf16_kernel("emulation", probe_of(true, 0, 0)).amx_gemm);
    try {
        cpu::choose_bf16_kernel("", probe_of(true, 0, 0), "yes");
        FAIL() << "an unknown SPARSENET_CPU_AMX_GEMM";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find("SPARSENET_CPU_AMX_GEMM: expected 0 or 1, got 'yes'"),
                  std::string::npos)
            << e.what();
    }
}

TEST(Bf16Choice, ForcedKernelsAndTheirErrors) {
    EXPECT_EQ(cpu::choose_bf16_kernel("onednn", probe_of(false, 9, 1)).kernel,
              cpu::Bf16Kernel::kOnednn);
    EXPECT_EQ(cpu::choose_bf16_kernel("emulation", probe_of(true, 0, 0)).kernel,
              cpu::Bf16Kernel::kEmulation);
    cpu::Bf16Probe none;
    none.isa = "avx2";
    none.error = "the CPU (oneDNN ISA avx2) has no BF16 instructions";
    const cpu::Bf16Choice fallback = cpu::choose_bf16_kernel("", none);
    EXPECT_EQ(fallback.kernel, cpu::Bf16Kernel::kEmulation);
    EXPECT_NE(fallback.line.find(none.error), std::string::npos) << fallback.line;
    try {
        cpu::choose_bf16_kernel("onednn", none);
        FAIL() << "onednn forced where it cannot run";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find(none.error), std::string::npos) << e.what();
    }
    try {
        cpu::choose_bf16_kernel("amx", none);
        FAIL() << "an unknown kernel name";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find("expected auto, onednn or emulation, got 'amx'"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace sparsenet
