// gemm with up to four rows of op(a) (the serving path, which does not call BLAS): every
// transpose combination and beta against a double reference, wide enough for several column
// slices, and bit-identical results whatever the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"

namespace sparsenet {
namespace {

using testing::Dense;

TEST(GemmFewRows, MatchesReferenceAndIsIdenticalForAnyThreadCount) {
    CpuBackend one(1), two(2), three(3);
    const float kPad = -777.0f;
    int cases = 0;
    for (size_t m : {1, 2, 3, 4})
        for (size_t n : {1, 17, 2100})  // 2100: slices of 1056 / 704 columns per thread
            for (size_t k : {1, 6, 67})
                for (bool ta : {false, true})
                    for (bool tb : {false, true})
                        for (float beta : {0.0f, 0.5f}) {
                            const uint64_t seed = 500 + cases++;
                            const float alpha = 1.25f;
                            const Dense<float> a = ta ? testing::random_dense<float>(k, m, 1, seed)
                                                      : testing::random_dense<float>(m, k, 1, seed);
                            const Dense<float> b =
                                tb ? testing::random_dense<float>(n, k, 2, seed + 1)
                                   : testing::random_dense<float>(k, n, 2, seed + 1);
                            Dense<float> c0 =
                                testing::random_dense<float>(m, n, 3, seed + 2, -1, 1, kPad);
                            if (beta == 0.0f)
                                for (size_t r = 0; r < m; ++r)
                                    for (size_t j = 0; j < n; ++j)
                                        c0.at(r, j) = std::numeric_limits<float>::quiet_NaN();
                            Dense<float> c1 = c0, c2 = c0, c3 = c0;
                            one.gemm(ta, tb, alpha, a.cview(), b.cview(), beta, c1.view());
                            two.gemm(ta, tb, alpha, a.cview(), b.cview(), beta, c2.view());
                            three.gemm(ta, tb, alpha, a.cview(), b.cview(), beta, c3.view());
                            ASSERT_EQ(c1.data, c2.data) << "m=" << m << " n=" << n << " k=" << k;
                            ASSERT_EQ(c1.data, c3.data) << "m=" << m << " n=" << n << " k=" << k;
                            for (size_t r = 0; r < m; ++r) {
                                for (size_t j = 0; j < n; ++j) {
                                    const testing::GemmReference g = testing::gemm_reference(
                                        ta, tb, alpha, a, b, beta, c0, k, r, j);
                                    const double ref = g.value, mag = g.magnitude;
                                    ASSERT_TRUE(testing::near(c1.at(r, j), ref, mag))
                                        << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta
                                        << " tb=" << tb << " beta=" << beta << " at " << r << ","
                                        << j << " got " << c1.at(r, j) << " want " << ref;
                                }
                                for (size_t j = n; j < c1.ld; ++j) ASSERT_EQ(c1.at(r, j), kPad);
                            }
                        }
}

}  // namespace
}  // namespace sparsenet
