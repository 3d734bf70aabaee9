// gemm: c = alpha * op(a) . op(b) + beta * c with padded leading dimensions, all transpose
// combinations, beta == 0 overwriting NaN, against a double reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"

namespace sparsenet {
namespace {

using testing::Dense;

TEST(Gemm, MatchesReferenceForAllTransposesAndShapes) {
    CpuBackend backend(2);
    const float kPad = -777.0f;
    int cases = 0;
    for (size_t m : {1, 5, 130})
        for (size_t n : {1, 5, 130})
            for (size_t k : {1, 7, 64})
                for (bool ta : {false, true})
                    for (bool tb : {false, true})
                        for (float beta : {0.0f, 1.0f}) {
                            const uint64_t seed = 10 + cases++;
                            const float alpha = 0.75f;
                            // op(a) is [m, k], op(b) is [k, n]; storage shapes follow the flags.
                            const Dense<float> a = ta ? testing::random_dense<float>(k, m, 2, seed)
                                                      : testing::random_dense<float>(m, k, 2, seed);
                            const Dense<float> b =
                                tb ? testing::random_dense<float>(n, k, 1, seed + 1)
                                   : testing::random_dense<float>(k, n, 1, seed + 1);
                            Dense<float> c =
                                testing::random_dense<float>(m, n, 3, seed + 2, -1, 1, kPad);
                            if (beta == 0.0f)
                                for (size_t r = 0; r < m; ++r)
                                    for (size_t j = 0; j < n; ++j)
                                        c.at(r, j) = std::numeric_limits<float>::quiet_NaN();
                            const Dense<float> c0 = c;
                            backend.gemm(ta, tb, alpha, a.cview(), b.cview(), beta, c.view());
                            for (size_t r = 0; r < m; ++r) {
                                for (size_t j = 0; j < n; ++j) {
                                    const testing::GemmReference g = testing::gemm_reference(
                                        ta, tb, alpha, a, b, beta, c0, k, r, j);
                                    const double ref = g.value, mag = g.magnitude;
                                    ASSERT_TRUE(testing::near(c.at(r, j), ref, mag))
                                        << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta
                                        << " tb=" << tb << " beta=" << beta << " at " << r << ","
                                        << j << " got " << c.at(r, j) << " want " << ref;
                                }
                                for (size_t j = n; j < c.ld; ++j) ASSERT_EQ(c.at(r, j), kPad);
                            }
                        }
}

TEST(Gemm, EmptyInnerDimensionScalesByBeta) {
    CpuBackend backend(1);
    Dense<float> a(3, 0), b(0, 4);
    a.ld = 1;
    b.ld = 4;
    Dense<float> c(3, 4, 0, 2.0f);
    backend.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.5f, c.view());
    for (size_t i = 0; i < 12; ++i) EXPECT_EQ(c.data[i], 1.0f);
    for (size_t i = 0; i < 12; ++i) c.data[i] = std::numeric_limits<float>::quiet_NaN();
    backend.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.0f, c.view());
    for (size_t i = 0; i < 12; ++i) EXPECT_EQ(c.data[i], 0.0f);
}

TEST(Gemm, DoubleInstantiationIsExactForSmallIntegers) {
    Dense<double> a(4, 3, 1), b(3, 5, 2), c(4, 5, 0);
    for (size_t r = 0; r < 4; ++r)
        for (size_t q = 0; q < 3; ++q) a.at(r, q) = double(r + 2 * q);
    for (size_t q = 0; q < 3; ++q)
        for (size_t j = 0; j < 5; ++j) b.at(q, j) = double(q * j) - 1.0;
    cpu::gemm(false, false, 2.0, a.cmat(), b.cmat(), 0.0, c.mat(), 1);
    for (size_t r = 0; r < 4; ++r)
        for (size_t j = 0; j < 5; ++j) {
            double ref = 0;
            for (size_t q = 0; q < 3; ++q) ref += a.at(r, q) * b.at(q, j);
            EXPECT_EQ(c.at(r, j), 2.0 * ref);
        }
}

TEST(Gemm, RejectsMismatchedShapes) {
    CpuBackend backend(1);
    Dense<float> a(3, 4), b(5, 2), c(3, 2);
    try {
        backend.gemm(false, false, 1.0f, a.cview(), b.cview(), 0.0f, c.view());
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInternal);
    }
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

// ---- gemm ----

TEST_F(CudaParity, GemmEveryTransposeAndShape) {
    struct Shape {
        size_t m, n, k;
    };
    int cases = 0;
    for (const Shape s : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{64, 130, 33}, Shape{300, 70, 513},
                          Shape{3, 600, 27}, Shape{5, 9, 0}})
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (float beta : {0.0f, 1.0f, 0.5f})
                    for (float alpha : {1.0f, -0.7f}) {
                        const uint64_t seed = uint64_t(++cases) * 13;
                        if (!sampled(uint64_t(cases))) continue;
                        const Dense<float> a = ta ? testing::random_dense<float>(s.k, s.m, 2, seed)
                                                  : testing::random_dense<float>(s.m, s.k, 2, seed);
                        const Dense<float> b =
                            tb ? testing::random_dense<float>(s.n, s.k, 1, seed + 1)
                               : testing::random_dense<float>(s.k, s.n, 1, seed + 1);
                        Dense<float> c =
                            testing::random_dense<float>(s.m, s.n, 3, seed + 2, -1, 1, kPad);
                        if (beta == 0.0f)
                            for (size_t r = 0; r < s.m; ++r)
                                for (size_t j = 0; j < s.n; ++j) c.at(r, j) = kNaN;
                        DevMat ad(dev(), a), bd(dev(), b), cd(dev(), c);
                        dev().gemm(ta, tb, alpha, ad.cview(), bd.cview(), beta, cd.view());
                        const Dense<float> got = cd.get(c);
                        Dense<float> want = c;
                        cpu_.gemm(ta, tb, alpha, a.cview(), b.cview(), beta, want.view());
                        Dense<float> mag = c;
                        for (size_t r = 0; r < s.m; ++r)
                            for (size_t j = 0; j < s.n; ++j)
                                mag.at(r, j) = beta == 0.0f ? 0.0f : std::fabs(beta * c.at(r, j));
                        const Dense<float> aa = abs_of(a), ba = abs_of(b);
                        cpu_.gemm(ta, tb, std::fabs(alpha), aa.cview(), ba.cview(), 1.0f,
                                  mag.view());
                        ASSERT_TRUE(close_by_magnitude(want, got, mag, 1e-4))
                            << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta
                            << " tb=" << tb << " beta=" << beta << " alpha=" << alpha;
                    }
}

// The three GEMMs of a layer on zero-padded views (backend/gemm_extents.h: the device runs n and
// k over the padding, 130 -> 132, or 136 for BF16): forward z = a . w, input delta d = z . w^T,
// weight gradient dw = a^T . z. The logical values are the CPU's (which runs the logical
// extents) within the GEMM tolerance, and the padding of c is still zeros.
TEST_F(CudaParity, GemmOverZeroPaddedViews) {
    struct Restore {  // the device backend is shared by the suite's tests
        Backend& b;
        Precision p;
        ~Restore() { b.set_precision(p); }
    } restore{dev(), dev().precision()};
    const size_t batch = 37, in = 64, out = 130, pad = 14;  // ld 144, as padded_ld(130)
    int cases = 0;
    for (Precision p : {restore.p, Precision::kBf16}) {
        dev().set_precision(p);
        for (int form = 0; form < 3; ++form)
            for (float beta : {0.0f, 1.0f}) {
                const uint64_t seed = uint64_t(++cases) * 31;
                const bool ta = form == 2, tb = form == 1;
                // form 0: [batch, in] . [in, out]; 1: [batch, out] . [in, out]^T; 2: [batch,
                // in]^T . [batch, out].
                const Dense<float> a = form == 1
                                           ? testing::random_dense<float>(batch, out, pad, seed)
                                           : testing::random_dense<float>(batch, in, 0, seed);
                const Dense<float> b =
                    form == 0   ? testing::random_dense<float>(in, out, pad, seed + 1)
                    : form == 1 ? testing::random_dense<float>(in, out, pad, seed + 1)
                                : testing::random_dense<float>(batch, out, pad, seed + 1);
                Dense<float> c = form == 0 ? testing::random_dense<float>(batch, out, pad, seed + 2)
                                 : form == 1 ? testing::random_dense<float>(batch, in, 0, seed + 2)
                                             : testing::random_dense<float>(in, out, pad, seed + 2);
                DevMat ad(dev(), a), bd(dev(), b), cd(dev(), c);
                ConstMatrixView av = ad.cview(), bv = bd.cview();
                MatrixView cv = cd.view();
                av.zero_padded = bv.zero_padded = cv.zero_padded = true;
                dev().gemm(ta, tb, 0.8f, av, bv, beta, cv);
                const Dense<float> got = cd.get(c);
                cpu_.set_precision(p);
                Dense<float> want = c;
                cpu_.gemm(ta, tb, 0.8f, a.cview(), b.cview(), beta, want.view());
                cpu_.set_precision(Precision::kFp32);
                Dense<float> mag = c;
                for (float& v : mag.data) v = std::fabs(beta * v);
                const Dense<float> aa = abs_of(a), ba = abs_of(b);
                cpu_.gemm(ta, tb, 0.8f, aa.cview(), ba.cview(), 1.0f, mag.view());
                ASSERT_TRUE(close_by_magnitude(want, got, mag, 1e-4))
                    << "form " << form << " beta " << beta << " precision " << to_string(p);
            }
    }
}

}  // namespace
}  // namespace sparsenet::parity
