// The emulated BF16 GEMM in blocks (src/backend/cpu/bf16_emulation.h) against the unblocked one:
// the whole operands rounded to BF16 into floats, then one FP32 sgemm. Cutting n or m only splits
// c between sgemm calls; cutting k changes the order of the FP32 additions, so both are held to the
// bound of bf16_matmul_test: 2 (k + 2) 2^-24 (|alpha| sum |a_i b_i| + |beta c|). Small panels cut
// every shape into several blocks, the last one partial; every transpose, operands with and
// without their BF16 copies, c's copy written block by block.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/cpu/bf16_emulation.h"
#include "backend/op_test_util.h"
#include "formulas/precision.h"

namespace sparsenet {
namespace {

using testing::Dense;

std::vector<uint16_t> copy_of(const Dense<float>& m) {
    std::vector<uint16_t> c(m.rows * m.ld, 0);
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t j = 0; j < m.cols; ++j) c[r * m.ld + j] = formulas::bf16_bits(m.at(r, j));
    return c;
}

// m's BF16 roundings as floats, contiguous: the unblocked emulation's operand.
cpu::CMatT<float> rounded(const Dense<float>& m, std::vector<float>& out) {
    out.resize(m.rows * m.cols);
    for (size_t r = 0; r < m.rows; ++r)
        for (size_t j = 0; j < m.cols; ++j) out[r * m.cols + j] = formulas::round_bf16(m.at(r, j));
    return {out.data(), m.rows, m.cols, m.cols};
}

struct Shape {
    size_t m, n, k;
    const char* cut;  // which dimension the panel size cuts
};

TEST(Bf16Emulation, BlocksMatchOneSgemmOnTheWholeRoundedOperands) {
    // panel 2,048 floats: n = 700 over k = 60 gives blocks of 48 columns (15 blocks, the last 28).
    const size_t panel = 2048;
    int cases = 0;
    for (const Shape s : {Shape{37, 700, 60, "n"}, Shape{33, 50, 900, "k"}, Shape{500, 20, 40, "m"},
                          Shape{3, 300, 64, "n, few rows"}})
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (bool copies : {false, true})
                    for (float beta : {0.0f, 1.0f, 0.75f}) {
                        const uint64_t seed = 900 + cases++;
                        const size_t pad = 5;  // ld = cols + 5: the copies' padding is read never
                        const Dense<float> a =
                            ta ? testing::random_dense<float>(s.k, s.m, pad, seed)
                               : testing::random_dense<float>(s.m, s.k, pad, seed);
                        const Dense<float> b =
                            tb ? testing::random_dense<float>(s.n, s.k, pad, seed + 1)
                               : testing::random_dense<float>(s.k, s.n, pad, seed + 1);
                        // beta == 0 overwrites c: NaNs there must not survive.
                        Dense<float> c0 = testing::random_dense<float>(s.m, s.n, pad, seed + 2);
                        if (beta == 0.0f) c0.at(0, 0) = std::numeric_limits<float>::quiet_NaN();
                        const std::vector<uint16_t> a16 = copy_of(a), b16 = copy_of(b);
                        const cpu::Bf16Operand oa{a.cmat(), copies ? a16.data() : nullptr};
                        const cpu::Bf16Operand ob{b.cmat(), copies ? b16.data() : nullptr};

                        Dense<float> got = c0, want = c0;
                        std::vector<uint16_t> got16(got.rows * got.ld, 0x7777);
                        std::vector<float> sa, sb;
                        cpu::gemm_bf16_emulated(ta, tb, -0.5f, oa, ob, beta, got.mat(),
                                                got16.data(), sa, sb, 2, panel);
                        std::vector<float> wa, wb;
                        cpu::gemm<float>(ta, tb, -0.5f, rounded(a, wa), rounded(b, wb), beta,
                                         want.mat(), 2);
                        for (size_t r = 0; r < s.m; ++r) {
                            for (size_t j = 0; j < s.n; ++j) {
                                double mag = 0.0;
                                for (size_t q = 0; q < s.k; ++q)
                                    mag += std::fabs(
                                        double(formulas::round_bf16(ta ? a.at(q, r) : a.at(r, q))) *
                                        formulas::round_bf16(tb ? b.at(j, q) : b.at(q, j)));
                                const double c = beta == 0.0f ? 0.0 : std::fabs(beta * c0.at(r, j));
                                const double tol =
                                    2.0 * double(s.k + 2) * std::ldexp(1.0, -24) * (0.5 * mag + c);
                                ASSERT_LE(std::fabs(double(got.at(r, j)) - want.at(r, j)), tol)
                                    << "cut " << s.cut << " ta " << ta << " tb " << tb << " copies "
                                    << copies << " beta " << beta << " at " << r << "," << j;
                                ASSERT_EQ(got16[r * got.ld + j], formulas::bf16_bits(got.at(r, j)));
                            }
                            for (size_t j = s.n; j < got.ld; ++j) {
                                ASSERT_EQ(got.at(r, j), c0.at(r, j))
                                    << "c's padding is not written";
                                ASSERT_EQ(got16[r * got.ld + j], 0u) << "the copy's padding: zeros";
                            }
                        }
                    }
}

// The same floats whether an operand is widened from its copy or rounded from its FP32 values, so
// the same c bit for bit (the blocks are the same either way).
TEST(Bf16Emulation, CopiesAndRoundingGiveTheSameBits) {
    const Dense<float> a = testing::random_dense<float>(40, 900, 3, 1);
    const Dense<float> b = testing::random_dense<float>(900, 70, 3, 2);
    const std::vector<uint16_t> a16 = copy_of(a), b16 = copy_of(b);
    Dense<float> c1(40, 70, 0), c2(40, 70, 0);
    std::vector<float> sa, sb;
    cpu::gemm_bf16_emulated(false, false, 1.0f, {a.cmat(), a16.data()}, {b.cmat(), b16.data()},
                            0.0f, c1.mat(), nullptr, sa, sb, 2, 4096);
    cpu::gemm_bf16_emulated(false, false, 1.0f, {a.cmat(), nullptr}, {b.cmat(), nullptr}, 0.0f,
                            c2.mat(), nullptr, sa, sb, 2, 4096);
    for (size_t r = 0; r < 40; ++r)
        for (size_t j = 0; j < 70; ++j) ASSERT_EQ(c1.at(r, j), c2.at(r, j)) << r << "," << j;
}

}  // namespace
}  // namespace sparsenet
