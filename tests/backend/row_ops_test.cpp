// The row statistics of a layer split by columns (model parallelism): row_max, exp_rows,
// divide_rows, row_sum_squares, clip_rows, and output_delta's CsrBatchView::row_totals.
//
//  * Each op against a straightforward double-precision reference written here (padded views
//    with ld > cols, empty rows, one row, rows wider than 4096, negative and large values).
//  * Compositions: row_max -> exp_rows -> divide_rows equals the backend's SoftMax
//    (bias_activation_forward, kSoftMax, no bias) within kOneRankUlps; row_sum_squares ->
//    clip_rows equals normalize_rows within kOneRankUlps.
//  * Column bands (2 and 3 "ranks"): partial statistics per band, combined the way an
//    all-reduce would (max of the maxima; float sum of the sums in rank order), then the apply
//    pass per band: equal to the whole-row result within kSplitUlps.
//  * output_delta, SoftMax + multinomial CrossEntropy, on column bands of the targets with
//    row_totals set: bit-identical to the whole row's delta on those columns; row_totals is
//    ignored by every other path.
//
// No finite-difference gradient checks here: these ops are not differentiated directly (the
// SoftMax / DeltaNorm they compose are, through output_delta and the existing ops, in
// tests/gradient/).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/loss.h"

namespace sparsenet {
namespace {

using testing::Dense;

constexpr float kPad = -777.0f;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Tolerances, in units in the last place of the float result (u = 2^-24, the unit roundoff: a
// relative error k*u is at most k ulps). The exp values are the SoftMax's own, bit for bit (same
// max, same float exp); only the normalisation differs.
// One rank vs the backend's SoftMax: it multiplies by float(1 / double sum) (2 roundings), the
// composition divides by float(sum) (2 roundings): at most 4u apart. vs normalize_rows: the
// factor from the float-rounded squared norm (sqrt halves that error): under 3u. Observed: 2 ulp.
constexpr int64_t kOneRankUlps = 4;
// Split into 2 or 3 bands: each band's sum is rounded to float and the sums are added in float
// (as an all-reduce over float buffers does): 3 + 2 roundings of the normaliser, plus the
// division's, against the SoftMax's 2: at most 8u. Observed: 4 ulp (SoftMax), 2 ulp (clip).
constexpr int64_t kSplitUlps = 8;

// Distance in representable floats (0 for equal values, +0 == -0).
int64_t ulps(float a, float b) {
    if (a == b) return 0;
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<int64_t>::max();
    auto key = [](float v) {
        int32_t i;
        std::memcpy(&i, &v, 4);
        return i < 0 ? int64_t(INT32_MIN) - int64_t(i) : int64_t(i);
    };
    const int64_t d = key(a) - key(b);
    return d < 0 ? -d : d;
}

uint32_t bits(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
}

// Every padding element (and the extra element) still holds the value it had in `before`.
::testing::AssertionResult same_padding(const Dense<float>& before, const Dense<float>& after) {
    for (size_t i = 0; i < before.data.size(); ++i) {
        const size_t ld = std::max<size_t>(before.ld, 1);
        if (i / ld < before.rows && i % ld < before.cols) continue;
        if (bits(before.data[i]) != bits(after.data[i]))
            return ::testing::AssertionFailure() << "padding element " << i << " changed";
    }
    return ::testing::AssertionSuccess();
}

// The columns [c0, c1) of m, same rows and ld.
MatrixView band(Dense<float>& m, size_t c0, size_t c1) {
    return MatrixView{m.data.data() + c0, m.rows, c1 - c0, m.ld};
}
ConstMatrixView cband(const Dense<float>& m, size_t c0, size_t c1) {
    return ConstMatrixView(m.data.data() + c0, m.rows, c1 - c0, m.ld);
}

// `parts` column bands of [0, n) as equal as possible (a band may be empty when n < parts).
std::vector<size_t> band_edges(size_t n, size_t parts) {
    std::vector<size_t> e(parts + 1);
    for (size_t p = 0; p <= parts; ++p) e[p] = n * p / parts;
    return e;
}

struct Shape {
    size_t rows, cols, pad;
};

// 0 rows, empty rows, one row, narrow, padded, wider than 4096.
const Shape kShapes[] = {{0, 5, 1}, {3, 0, 2},    {1, 1, 0},    {1, 37, 3},
                         {7, 5, 3}, {64, 130, 2}, {5, 4099, 1}, {3, 5000, 7}};

std::string shape_name(const Shape& s) {
    return std::to_string(s.rows) + "x" + std::to_string(s.cols) +
           " ld=" + std::to_string(s.cols + s.pad);
}

// Random values; every third row spread over [-80, 80] (exp under- and overflow without the
// shift), every fifth row far from zero (around 1e4).
Dense<float> random_rows(const Shape& s, uint64_t seed) {
    Dense<float> m = testing::random_dense<float>(s.rows, s.cols, s.pad, seed, -3, 3, kPad);
    for (size_t r = 0; r < s.rows; ++r)
        for (size_t c = 0; c < s.cols; ++c) {
            if (r % 3 == 1) m.at(r, c) *= 80.0f / 3.0f;
            if (r % 5 == 4) m.at(r, c) = 1e4f + 10.0f * m.at(r, c);
        }
    return m;
}

// ---- row_max ----

TEST(RowOps, RowMaxMatchesReference) {
    CpuBackend backend(2);
    int seed = 0;
    for (const Shape& s : kShapes) {
        const Dense<float> m = random_rows(s, uint64_t(++seed));
        const Dense<float> before = m;
        std::vector<float> out(s.rows + 1, kPad);
        backend.row_max(m.cview(), out.data());
        for (size_t r = 0; r < s.rows; ++r) {
            double want = -std::numeric_limits<double>::infinity();
            for (size_t c = 0; c < s.cols; ++c) want = std::max(want, double(m.at(r, c)));
            ASSERT_EQ(double(out[r]), want) << shape_name(s) << " row " << r;
        }
        EXPECT_EQ(bits(out[s.rows]), bits(kPad)) << "wrote past the rows";
        EXPECT_TRUE(same_padding(before, m));
    }
}

TEST(RowOps, RowMaxIgnoresNaNAndKeepsInfinities) {
    CpuBackend backend(2);
    Dense<float> m = testing::random_dense<float>(6, 40, 2, 3, -1, 1, kPad);
    m.at(0, 0) = kNaN;  // first entry NaN: still the max of the rest
    m.at(0, 17) = 5.0f;
    m.at(1, 39) = kNaN;  // last entry NaN
    m.at(1, 3) = 4.0f;
    for (size_t c = 0; c < 40; ++c) m.at(2, c) = kNaN;  // every entry NaN: -inf
    m.at(3, 20) = kInf;
    for (size_t c = 0; c < 40; ++c) m.at(4, c) = -kInf;
    m.at(5, 1) = -kInf;
    m.at(5, 2) = kNaN;
    m.at(5, 30) = 7.0f;
    std::vector<float> out(6);
    backend.row_max(m.cview(), out.data());
    EXPECT_EQ(out[0], 5.0f);
    EXPECT_EQ(out[1], 4.0f);
    EXPECT_EQ(out[2], -kInf);
    EXPECT_EQ(out[3], kInf);
    EXPECT_EQ(out[4], -kInf);
    EXPECT_EQ(out[5], 7.0f);
}

// ---- exp_rows ----

TEST(RowOps, ExpRowsMatchesReference) {
    CpuBackend backend(2);
    int seed = 100;
    for (const Shape& s : kShapes)
        for (bool shift_is_max : {true, false}) {
            const Dense<float> m0 = random_rows(s, uint64_t(++seed));
            std::vector<float> shift(s.rows);
            backend.row_max(m0.cview(), shift.data());
            // Otherwise an arbitrary shift (values up to ~60 above it: large exp, no overflow).
            if (!shift_is_max)
                for (size_t r = 0; r < s.rows; ++r)
                    shift[r] = s.cols == 0 ? 0.0f : shift[r] - float(r % 4) * 20.0f;
            Dense<float> m = m0;
            std::vector<float> sum(s.rows + 1, kPad);
            backend.exp_rows(shift.data(), m.view(), sum.data());
            const std::string what = shape_name(s) + (shift_is_max ? " max shift" : " shifted");
            for (size_t r = 0; r < s.rows; ++r) {
                double want_sum = 0;
                for (size_t c = 0; c < s.cols; ++c) {
                    // exp in double of the float difference the op forms (the float subtraction
                    // is part of its definition, exp(m - shift) in float arithmetic).
                    const float d = m0.at(r, c) - shift[r];
                    const double want = std::exp(double(d));
                    want_sum += double(float(want));
                    ASSERT_TRUE(testing::near(m.at(r, c), want, want, 4e-7, 1e-37))
                        << what << " (" << r << "," << c << ") got " << m.at(r, c) << " want "
                        << want;
                }
                ASSERT_TRUE(testing::near(sum[r], want_sum, want_sum, 4e-7, 0.0))
                    << what << " row " << r << " sum " << sum[r] << " want " << want_sum;
            }
            EXPECT_EQ(bits(sum[s.rows]), bits(kPad)) << what;
            EXPECT_TRUE(same_padding(m0, m)) << what;
        }
}

TEST(RowOps, ExpRowsOfEmptyRowsSumsToZero) {
    CpuBackend backend(2);
    Dense<float> m(4, 0, 3, kPad);
    const Dense<float> before = m;
    std::vector<float> shift(4, -kInf), sum(4, kPad);
    backend.exp_rows(shift.data(), m.view(), sum.data());
    for (float v : sum) EXPECT_EQ(bits(v), bits(0.0f));
    EXPECT_TRUE(same_padding(before, m));
}

// ---- divide_rows ----

TEST(RowOps, DivideRowsIsIeeeDivision) {
    CpuBackend backend(2);
    int seed = 200;
    for (const Shape& s : kShapes) {
        const Dense<float> m0 = random_rows(s, uint64_t(++seed));
        std::vector<float> divisor(s.rows);
        for (size_t r = 0; r < s.rows; ++r) divisor[r] = r % 2 == 0 ? 3.0f + float(r) : 0.37f;
        Dense<float> m = m0;
        backend.divide_rows(divisor.data(), m.view());
        for (size_t r = 0; r < s.rows; ++r)
            for (size_t c = 0; c < s.cols; ++c) {
                // float(double / double) is the correctly rounded float quotient.
                const float want = float(double(m0.at(r, c)) / double(divisor[r]));
                ASSERT_EQ(bits(m.at(r, c)), bits(want)) << shape_name(s) << " " << r << "," << c;
            }
        EXPECT_TRUE(same_padding(m0, m)) << shape_name(s);
    }
}

// ---- row_sum_squares ----

TEST(RowOps, RowSumSquaresMatchesReference) {
    CpuBackend backend(2);
    int seed = 300;
    for (const Shape& s : kShapes) {
        const Dense<float> m = random_rows(s, uint64_t(++seed));
        std::vector<float> out(s.rows + 1, kPad);
        backend.row_sum_squares(m.cview(), out.data());
        for (size_t r = 0; r < s.rows; ++r) {
            double want = 0;
            for (size_t c = 0; c < s.cols; ++c) want += double(m.at(r, c)) * double(m.at(r, c));
            // Summed in double, rounded once: at most one float rounding from the reference.
            ASSERT_LE(ulps(out[r], float(want)), 1) << shape_name(s) << " row " << r;
        }
        EXPECT_EQ(bits(out[s.rows]), bits(kPad)) << shape_name(s);
    }
}

// ---- clip_rows ----

// Rows alternately far within and far beyond max_norm (never at the threshold).
Dense<float> rows_around_norm(const Shape& s, uint64_t seed, float* max_norm) {
    Dense<float> m = testing::random_dense<float>(s.rows, s.cols, s.pad, seed, -1, 1, kPad);
    for (size_t r = 0; r < s.rows; r += 2)
        for (size_t c = 0; c < s.cols; ++c) m.at(r, c) *= 10.0f;
    *max_norm = float(std::sqrt(double(s.cols) / 3.0) * 2.0);
    return m;
}

TEST(RowOps, ClipRowsMatchesReference) {
    CpuBackend backend(2);
    int seed = 400;
    for (const Shape& s : kShapes) {
        float max_norm = 0;
        const Dense<float> m0 = rows_around_norm(s, uint64_t(++seed), &max_norm);
        std::vector<float> sq(s.rows);
        for (size_t r = 0; r < s.rows; ++r) {
            double n2 = 0;
            for (size_t c = 0; c < s.cols; ++c) n2 += double(m0.at(r, c)) * double(m0.at(r, c));
            sq[r] = float(n2);
        }
        Dense<float> m = m0;
        backend.clip_rows(max_norm, sq.data(), m.view());
        for (size_t r = 0; r < s.rows; ++r) {
            const double norm = std::sqrt(double(sq[r]));
            const bool clipped = norm > double(max_norm);
            for (size_t c = 0; c < s.cols; ++c) {
                if (!clipped) {
                    ASSERT_EQ(bits(m.at(r, c)), bits(m0.at(r, c))) << shape_name(s);
                    continue;
                }
                const double want = double(m0.at(r, c)) * double(max_norm) / norm;
                ASSERT_TRUE(testing::near(m.at(r, c), want, std::fabs(want), 2.5e-7, 0.0))
                    << shape_name(s) << " (" << r << "," << c << ") got " << m.at(r, c) << " want "
                    << want;
            }
        }
        EXPECT_TRUE(same_padding(m0, m)) << shape_name(s);
    }
    // A NaN squared norm leaves its row alone (the comparison is false), as normalize_rows.
    Dense<float> m = testing::random_dense<float>(2, 3, 1, 9, -1, 1, kPad);
    const Dense<float> m0 = m;
    const std::vector<float> sq{kNaN, 100.0f};
    backend.clip_rows(1.0f, sq.data(), m.view());
    for (size_t c = 0; c < 3; ++c) {
        EXPECT_EQ(bits(m.at(0, c)), bits(m0.at(0, c)));
        EXPECT_FLOAT_EQ(m.at(1, c), m0.at(1, c) * 0.1f);
    }
}

// ---- compositions: one rank and column bands ----

struct Observed {
    int64_t one_rank = 0, split = 0;
};

// The SoftMax of a row split into `parts` bands: per band row_max, max of the maxima; per band
// exp_rows with it, float sum of the band sums in band order; per band divide_rows.
Dense<float> softmax_by_bands(Backend& backend, const Dense<float>& z0, size_t parts) {
    Dense<float> z = z0;
    const size_t rows = z.rows;
    const std::vector<size_t> e = band_edges(z.cols, parts);
    std::vector<float> part(rows), shift(rows, -kInf), total(rows, 0.0f);
    for (size_t p = 0; p < parts; ++p) {  // all-reduce(max)
        backend.row_max(cband(z, e[p], e[p + 1]), part.data());
        for (size_t r = 0; r < rows; ++r) shift[r] = part[r] > shift[r] ? part[r] : shift[r];
    }
    for (size_t p = 0; p < parts; ++p) {  // all-reduce(sum)
        backend.exp_rows(shift.data(), band(z, e[p], e[p + 1]), part.data());
        for (size_t r = 0; r < rows; ++r) total[r] += part[r];
    }
    for (size_t p = 0; p < parts; ++p) backend.divide_rows(total.data(), band(z, e[p], e[p + 1]));
    return z;
}

TEST(RowOps, SoftmaxCompositionEqualsBackendSoftmaxWholeAndSplit) {
    CpuBackend backend(2);
    formulas::ActivationParams act;
    act.kind = Activation::kSoftMax;
    Observed worst;
    int seed = 500;
    for (const Shape& s : kShapes) {
        const Dense<float> z0 = random_rows(s, uint64_t(++seed));
        Dense<float> want = z0;
        backend.bias_activation_forward(act, nullptr, want.view());
        for (size_t parts : {1, 2, 3}) {
            const Dense<float> got = softmax_by_bands(backend, z0, parts);
            const int64_t limit = parts == 1 ? kOneRankUlps : kSplitUlps;
            int64_t& seen = parts == 1 ? worst.one_rank : worst.split;
            for (size_t r = 0; r < s.rows; ++r)
                for (size_t c = 0; c < s.cols; ++c) {
                    const int64_t u = ulps(got.at(r, c), want.at(r, c));
                    seen = std::max(seen, u);
                    ASSERT_LE(u, limit)
                        << shape_name(s) << " bands=" << parts << " (" << r << "," << c << ") got "
                        << got.at(r, c) << " want " << want.at(r, c);
                }
            EXPECT_TRUE(same_padding(z0, got)) << shape_name(s) << " bands=" << parts;
        }
        // And the SoftMax itself against a double reference (rows sum to 1).
        for (size_t r = 0; r < s.rows; ++r) {
            double mx = -1e300, sum = 0;
            for (size_t c = 0; c < s.cols; ++c) mx = std::max(mx, double(z0.at(r, c)));
            for (size_t c = 0; c < s.cols; ++c) sum += std::exp(double(z0.at(r, c)) - mx);
            for (size_t c = 0; c < s.cols; ++c) {
                const double ref = std::exp(double(z0.at(r, c)) - mx) / sum;
                // |x - max| up to 160: the float subtraction costs up to 160 * 2^-24 relative.
                ASSERT_TRUE(testing::near(want.at(r, c), ref, ref, 1.2e-5, 1e-30))
                    << shape_name(s) << " (" << r << "," << c << ")";
            }
        }
    }
    std::cout << "[ softmax ] largest difference from the backend SoftMax: one rank "
              << worst.one_rank << " ulp, 2 or 3 bands " << worst.split << " ulp\n";
}

TEST(RowOps, SoftmaxCompositionOfSpecialRows) {
    CpuBackend backend(2);
    formulas::ActivationParams act;
    act.kind = Activation::kSoftMax;
    Dense<float> z0(4, 9, 2, kPad);
    for (size_t c = 0; c < 9; ++c) {
        z0.at(0, c) = 1e30f;                  // all equal and huge: 1/9 each
        z0.at(1, c) = c == 4 ? 0.0f : -1e4f;  // one survivor: exactly 1 and 0
        z0.at(2, c) = -100.0f - float(c);     // all far below zero (the shift saves them)
        z0.at(3, c) = float(c) * 0.5f;
    }
    Dense<float> want = z0;
    backend.bias_activation_forward(act, nullptr, want.view());
    for (size_t parts : {1, 2, 3}) {
        const Dense<float> got = softmax_by_bands(backend, z0, parts);
        for (size_t r = 0; r < 4; ++r)
            for (size_t c = 0; c < 9; ++c)
                ASSERT_LE(ulps(got.at(r, c), want.at(r, c)), parts == 1 ? kOneRankUlps : kSplitUlps)
                    << "bands=" << parts << " (" << r << "," << c << ")";
        EXPECT_EQ(got.at(1, 4), 1.0f);
        EXPECT_EQ(got.at(1, 0), 0.0f);
    }
}

TEST(RowOps, ClipRowsComposedEqualsNormalizeRowsWholeAndSplit) {
    CpuBackend backend(2);
    Observed worst;
    int seed = 600;
    for (const Shape& s : kShapes) {
        float max_norm = 0;
        const Dense<float> m0 = rows_around_norm(s, uint64_t(++seed), &max_norm);
        Dense<float> want = m0;
        backend.normalize_rows(max_norm, want.view());
        for (size_t parts : {1, 2, 3}) {
            Dense<float> got = m0;
            const std::vector<size_t> e = band_edges(s.cols, parts);
            std::vector<float> part(s.rows), total(s.rows, 0.0f);
            for (size_t p = 0; p < parts; ++p) {  // all-reduce(sum) of the squared norms
                backend.row_sum_squares(cband(got, e[p], e[p + 1]), part.data());
                for (size_t r = 0; r < s.rows; ++r) total[r] += part[r];
            }
            for (size_t p = 0; p < parts; ++p)
                backend.clip_rows(max_norm, total.data(), band(got, e[p], e[p + 1]));
            const int64_t limit = parts == 1 ? kOneRankUlps : kSplitUlps;
            int64_t& seen = parts == 1 ? worst.one_rank : worst.split;
            for (size_t r = 0; r < s.rows; ++r)
                for (size_t c = 0; c < s.cols; ++c) {
                    const int64_t u = ulps(got.at(r, c), want.at(r, c));
                    seen = std::max(seen, u);
                    ASSERT_LE(u, limit)
                        << shape_name(s) << " bands=" << parts << " (" << r << "," << c << ")";
                    // Rows normalize_rows leaves alone are not written either.
                    if (bits(want.at(r, c)) == bits(m0.at(r, c))) {
                        ASSERT_EQ(bits(got.at(r, c)), bits(m0.at(r, c)));
                    }
                }
            EXPECT_TRUE(same_padding(m0, got)) << shape_name(s) << " bands=" << parts;
        }
    }
    std::cout << "[ clip ] largest difference from normalize_rows: one rank " << worst.one_rank
              << " ulp, 2 or 3 bands " << worst.split << " ulp\n";
}

// ---- thread count ----

TEST(RowOps, ResultsDoNotDependOnTheThreadCount) {
    CpuBackend one(1), many(3);
    const Shape s{64, 4099, 3};  // 64 x 4099: large enough for the parallel loops
    const Dense<float> m0 = random_rows(s, 77);
    std::vector<float> a(s.rows), b(s.rows), sa(s.rows), sb(s.rows);
    one.row_max(m0.cview(), a.data());
    many.row_max(m0.cview(), b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
    one.row_sum_squares(m0.cview(), sa.data());
    many.row_sum_squares(m0.cview(), sb.data());
    EXPECT_EQ(std::memcmp(sa.data(), sb.data(), sa.size() * 4), 0);
    Dense<float> x = m0, y = m0;
    one.exp_rows(a.data(), x.view(), sa.data());
    many.exp_rows(a.data(), y.view(), sb.data());
    EXPECT_EQ(x.data, y.data);
    EXPECT_EQ(std::memcmp(sa.data(), sb.data(), sa.size() * 4), 0);
    one.divide_rows(sa.data(), x.view());
    many.divide_rows(sa.data(), y.view());
    EXPECT_EQ(x.data, y.data);
    std::vector<float> sq(s.rows, 1e6f);
    one.clip_rows(1.0f, sq.data(), x.view());
    many.clip_rows(1.0f, sq.data(), y.view());
    EXPECT_EQ(x.data, y.data);
}

// ---- output_delta with row_totals ----

// The entries of `d` in columns [c0, c1), renumbered from 0 (same rows, weights dropped).
Dataset targets_band(const Dataset& d, uint32_t c0, uint32_t c1) {
    Dataset b;
    b.rows = d.rows;
    b.cols = c1 - c0;
    b.offsets.assign(1, 0);
    for (uint64_t r = 0; r < d.rows; ++r) {
        for (uint64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e) {
            const uint32_t j = d.indices[e];
            if (j < c0 || j >= c1) continue;
            b.indices.push_back(j - c0);
            if (!d.values.empty()) b.values.push_back(d.values[e]);
        }
        b.offsets.push_back(b.indices.size());
    }
    return b;
}

formulas::LossParams multinomial_ce() {
    formulas::LossParams p;
    p.kind = ErrorFunction::kCrossEntropy;
    p.multinomial = true;
    return p;
}

TEST(RowOps, OutputDeltaWithRowTotalsOnBandsEqualsTheWholeRow) {
    CpuBackend backend(2);
    formulas::ActivationParams act;
    act.kind = Activation::kSoftMax;
    const formulas::LossParams loss = multinomial_ce();
    int seed = 700;
    for (uint32_t n : {7u, 130u, 4500u})
        for (testing::RowShape shape : testing::kAllShapes)
            for (bool valued : {false, true})
                for (bool weighted : {false, true}) {
                    ++seed;
                    const size_t rows = 9;
                    const Dataset t = testing::random_dataset(rows + 4, n, shape, valued, seed);
                    const testing::TestBatch batch = testing::make_batch(t.rows, rows, true, seed);
                    std::vector<float> wts(t.rows);
                    for (size_t i = 0; i < wts.size(); ++i) wts[i] = 0.5f + 0.25f * float(i % 5);
                    // The whole row's target sums, as output_delta forms them (double, in entry
                    // order, rounded to float): on a cluster, an all-reduce of the band sums.
                    std::vector<float> totals(t.rows);
                    for (uint64_t r = 0; r < t.rows; ++r) {
                        double sum = 0;
                        for (uint64_t e = t.offsets[r]; e < t.offsets[r + 1]; ++e)
                            sum += testing::entry_value(t, e);
                        totals[r] = float(sum);
                    }
                    Dense<float> a = testing::random_dense<float>(rows, n, 2, seed + 1, -3, 3);
                    backend.bias_activation_forward(act, nullptr, a.view());

                    CsrBatchView whole = testing::csr_view(t, batch);
                    if (weighted) whole.weights = wts.data();
                    Dense<float> want(rows, n, 1, kPad);
                    double want_loss = 0;
                    backend.output_delta(loss, act, a.cview(), whole, 0.5f, want.view(),
                                         &want_loss);

                    const std::string what = std::to_string(n) + " " + testing::shape_name(shape) +
                                             (valued ? " valued" : " boolean") +
                                             (weighted ? " weighted" : "");
                    for (size_t parts : {2, 3}) {
                        const std::vector<size_t> e = band_edges(n, parts);
                        double band_loss = 0;
                        for (size_t p = 0; p < parts; ++p) {
                            const uint32_t c0 = uint32_t(e[p]), c1 = uint32_t(e[p + 1]);
                            const Dataset tb = targets_band(t, c0, c1);
                            CsrBatchView v = testing::csr_view(tb, batch, c0);
                            v.row_totals = totals.data();
                            if (weighted) v.weights = wts.data();
                            const ConstMatrixView ab(a.data.data() + c0, rows, c1 - c0, a.ld);
                            Dense<float> got(rows, c1 - c0, 1, kPad);
                            const Dense<float> before = got;
                            backend.output_delta(loss, act, ab, v, 0.5f, got.view(), &band_loss);
                            for (size_t r = 0; r < rows; ++r)
                                for (size_t c = c0; c < c1; ++c)
                                    ASSERT_EQ(bits(got.at(r, c - c0)), bits(want.at(r, c)))
                                        << what << " bands=" << parts << " (" << r << "," << c
                                        << ")";
                            ASSERT_TRUE(same_padding(before, got)) << what;
                        }
                        // The loss: the bands' stored entries partition the row's.
                        ASSERT_TRUE(
                            testing::near(band_loss, want_loss, std::fabs(want_loss), 1e-12, 1e-12))
                            << what << " bands=" << parts;
                    }
                }
}

TEST(RowOps, RowTotalsAreReadOnlyByTheMultinomialPath) {
    CpuBackend backend(2);
    const size_t rows = 6;
    const uint32_t n = 40;
    const Dataset t = testing::random_dataset(rows + 2, n, testing::RowShape::kUniform, true, 5);
    const testing::TestBatch batch = testing::make_batch(t.rows, rows, true, 6);
    std::vector<float> garbage(t.rows, 1234.5f);
    for (int k = 0; k <= int(Activation::kSoftSign); ++k)
        for (int l = 0; l <= int(ErrorFunction::kDataScaledMarginalCrossEntropy); ++l)
            for (bool multinomial : {false, true}) {
                formulas::ActivationParams act;
                act.kind = Activation(k);
                formulas::LossParams loss;
                loss.kind = ErrorFunction(l);
                loss.multinomial = multinomial;
                Dense<float> a = testing::random_dense<float>(rows, n, 1, 8, -2, 2);
                backend.bias_activation_forward(act, nullptr, a.view());
                const CsrBatchView plain = testing::csr_view(t, batch);
                CsrBatchView with = plain;
                with.row_totals = garbage.data();
                Dense<float> d1(rows, n), d2(rows, n);
                double l1 = 0, l2 = 0;
                backend.output_delta(loss, act, a.cview(), plain, 1.0f, d1.view(), &l1);
                backend.output_delta(loss, act, a.cview(), with, 1.0f, d2.view(), &l2);
                const bool reads = act.kind == Activation::kSoftMax &&
                                   loss.kind == ErrorFunction::kCrossEntropy && multinomial;
                const std::string what = std::string(to_string(act.kind)) + "/" +
                                         to_string(loss.kind) + (multinomial ? " multinomial" : "");
                EXPECT_EQ(std::memcmp(&l1, &l2, sizeof(double)), 0) << what;  // loss: never
                const bool same =
                    std::memcmp(d1.data.data(), d2.data.data(), d1.data.size() * 4) == 0;
                EXPECT_EQ(same, !reads) << what;
            }
}

// ---- the op table ----

TEST(RowOps, OpNamesAndSupport) {
    EXPECT_STREQ(to_string(Op::kRowMax), "row_max");
    EXPECT_STREQ(to_string(Op::kExpRows), "exp_rows");
    EXPECT_STREQ(to_string(Op::kDivideRows), "divide_rows");
    EXPECT_STREQ(to_string(Op::kRowSumSquares), "row_sum_squares");
    EXPECT_STREQ(to_string(Op::kClipRows), "clip_rows");
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

// ---- reductions ----

TEST_F(CudaParity, ColumnSum) {
    int cases = 0;
    for (size_t rows : {0, 1, 7, 64, 1000, 5000})
        for (size_t cols : {1, 5, 130, 1000})
            for (float alpha : {1.0f, 0.5f})
                for (float beta : {0.0f, 1.0f, -0.3f}) {
                    const uint64_t seed = uint64_t(++cases) * 7;
                    if (!sampled(uint64_t(cases))) continue;
                    const Dense<float> m = testing::random_dense<float>(rows, cols, 3, seed);
                    std::vector<float> out0(cols);
                    std::mt19937_64 rng(seed);
                    for (float& v : out0) v = beta == 0.0f ? kNaN : float(rng() % 100) / 50.0f;
                    DevMat md(dev(), m);
                    DeviceArray<float> od = dev_array(dev(), out0, "column sums");
                    dev().column_sum(md.cview(), alpha, beta, od.data());
                    std::vector<float> want = out0;
                    cpu_.column_sum(m.cview(), alpha, beta, want.data());
                    const std::vector<float> got = fetch(od, cols);
                    // Relative to the sum of |terms|.
                    for (size_t c = 0; c < cols; ++c) {
                        double mag = beta == 0.0f ? 0.0 : std::fabs(beta * out0[c]);
                        for (size_t r = 0; r < rows; ++r) mag += std::fabs(alpha * m.at(r, c));
                        ASSERT_LE(std::fabs(got[c] - want[c]), 1e-5 * mag + 1e-7)
                            << rows << "x" << cols << " col " << c << " cpu " << want[c]
                            << " device " << got[c];
                    }
                }
}

TEST_F(CudaParity, NormalizeRowsAndColumns) {
    int cases = 0;
    for (size_t rows : {1, 7, 64, 1000})
        for (size_t cols : {1, 33, 130, 1000})
            for (bool by_columns : {false, true}) {
                const uint64_t seed = uint64_t(++cases) * 23;
                Dense<float> m = testing::random_dense<float>(rows, cols, 2, seed, -1, 1, kPad);
                // Some rows / columns far longer than the bound, the others shorter.
                std::mt19937_64 rng(seed);
                if (by_columns) {
                    for (size_t c = 0; c < cols; ++c)
                        if (rng() % 3 == 0)
                            for (size_t r = 0; r < rows; ++r) m.at(r, c) *= 10.0f;
                } else {
                    for (size_t r = 0; r < rows; ++r)
                        if (rng() % 3 == 0)
                            for (size_t c = 0; c < cols; ++c) m.at(r, c) *= 10.0f;
                }
                const float max_norm =
                    float(std::sqrt(double(by_columns ? rows : cols) / 3.0) * 1.5);
                DevMat md(dev(), m);
                Dense<float> want = m;
                if (by_columns) {
                    dev().normalize_columns(max_norm, md.view());
                    cpu_.normalize_columns(max_norm, want.view());
                } else {
                    dev().normalize_rows(max_norm, md.view());
                    cpu_.normalize_rows(max_norm, want.view());
                }
                const Dense<float> got = md.get(m);
                ASSERT_TRUE(close_dense(want, got, 1e-6, 0.0, 1e-7))
                    << rows << "x" << cols << (by_columns ? " columns" : " rows");
                // What the CPU left alone, the device left alone too, bit for bit.
                for (size_t r = 0; r < rows; ++r)
                    for (size_t c = 0; c < cols; ++c)
                        if (bits(want.at(r, c)) == bits(m.at(r, c))) {
                            ASSERT_EQ(bits(got.at(r, c)), bits(m.at(r, c))) << r << "," << c;
                        }
            }
}

// ---- row statistics of a column-split layer (model parallelism) ----

// Per row: row_max (exact: NaNs ignored, -inf for empty rows), exp_rows with the CPU's max
// (element-wise 1e-5, sums relative 1e-5), divide_rows (IEEE division: bit for bit; NaN as NaN),
// row_sum_squares (relative 1e-6), clip_rows with the CPU's squared norms (the factor is
// computed in double on both: 1e-6, and rows within the bound untouched bit for bit); then the
// SoftMax composed of them on the device against the CPU's SoftMax (1e-5, as the SoftMax).
TEST_F(CudaParity, RowStatisticsOps) {
    struct Shape {
        size_t rows, cols;
    };
    formulas::ActivationParams softmax;
    softmax.kind = Activation::kSoftMax;
    int cases = 0;
    for (const Shape s : {Shape{1, 1}, Shape{3, 0}, Shape{7, 5}, Shape{64, 130}, Shape{3, 1000},
                          Shape{33, 4099}, Shape{5, 5000}}) {
        const uint64_t seed = uint64_t(++cases) * 31;
        const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.cols);
        Dense<float> m = testing::random_dense<float>(s.rows, s.cols, 3, seed, -4, 4, kPad);
        std::mt19937_64 rng(seed);
        for (size_t r = 0; r < s.rows; ++r) {  // spread rows, long rows, NaN and inf entries
            const uint64_t kind = rng() % 5;
            for (size_t c = 0; c < s.cols; ++c) {
                if (kind == 1) m.at(r, c) *= 20.0f;
                if (kind == 2 && r > 0) m.at(r, c) *= 10.0f;
            }
            if (kind == 3 && s.cols > 2) m.at(r, rng() % s.cols) = kNaN;
            if (kind == 4 && s.cols > 2) m.at(r, rng() % s.cols) = -kInf;
        }
        DevMat md(dev(), m);
        DeviceArray<float> out_d(dev(), s.rows + 1, "row stats");

        // row_max
        std::vector<float> want_max(s.rows);
        cpu_.row_max(m.cview(), want_max.data());
        dev().row_max(md.cview(), out_d.data());
        const std::vector<float> got_max = fetch(out_d, s.rows);
        for (size_t r = 0; r < s.rows; ++r)
            ASSERT_EQ(got_max[r], want_max[r]) << what << " row_max " << r;  // +0 == -0

        // row_sum_squares (of the rows without NaN; NaN rows give NaN on both)
        std::vector<float> want_sq(s.rows);
        cpu_.row_sum_squares(m.cview(), want_sq.data());
        dev().row_sum_squares(md.cview(), out_d.data());
        const std::vector<float> got_sq = fetch(out_d, s.rows);
        for (size_t r = 0; r < s.rows; ++r) {
            if (std::isnan(want_sq[r]) || std::isinf(want_sq[r])) {  // NaN payloads may differ
                ASSERT_TRUE(std::isnan(got_sq[r]) == std::isnan(want_sq[r]) &&
                            (std::isnan(got_sq[r]) || got_sq[r] == want_sq[r]))
                    << what << " row_sum_squares " << r << " cpu " << want_sq[r] << " device "
                    << got_sq[r];
                continue;
            }
            ASSERT_TRUE(close_scalar(want_sq[r], got_sq[r], 1e-6, 0.0))
                << what << " row_sum_squares " << r << " cpu " << want_sq[r] << " device "
                << got_sq[r];
        }

        // exp_rows with the CPU's maxima, then divide_rows by the CPU's sums
        DeviceArray<float> shift_d = dev_array(dev(), want_max, "shift");
        Dense<float> want_e = m;
        std::vector<float> want_sum(s.rows);
        cpu_.exp_rows(want_max.data(), want_e.view(), want_sum.data());
        dev().exp_rows(shift_d.data(), md.view(), out_d.data());
        const Dense<float> got_e = md.get(m);
        ASSERT_TRUE(close_dense(want_e, got_e, 1e-5, 0.0, 1e-37)) << what << " exp_rows";
        const std::vector<float> got_sum = fetch(out_d, s.rows);
        for (size_t r = 0; r < s.rows; ++r) {
            if (std::isnan(want_sum[r])) {
                ASSERT_TRUE(std::isnan(got_sum[r])) << what << " exp_rows sum " << r;
                continue;
            }
            ASSERT_TRUE(close_scalar(want_sum[r], got_sum[r], 1e-5, 0.0))
                << what << " exp_rows sum " << r << " cpu " << want_sum[r] << " device "
                << got_sum[r];
        }
        DevMat ed(dev(), want_e);  // the CPU's exp values: divide_rows compared bit for bit
        DeviceArray<float> sum_d = dev_array(dev(), want_sum, "sums");
        Dense<float> want_q = want_e;
        cpu_.divide_rows(want_sum.data(), want_q.view());
        dev().divide_rows(sum_d.data(), ed.view());
        const Dense<float> got_q = ed.get(want_e);
        for (size_t i = 0; i < want_q.data.size(); ++i) {
            if (std::isnan(want_q.data[i])) {  // NaN: any NaN (the device's payload differs)
                ASSERT_TRUE(std::isnan(got_q.data[i])) << what << " divide_rows " << i;
                continue;
            }
            ASSERT_EQ(bits(got_q.data[i]), bits(want_q.data[i])) << what << " divide_rows " << i;
        }

        // clip_rows with the CPU's squared norms
        const float max_norm = float(std::sqrt(double(s.cols) / 3.0) * 1.5 * 4.0);
        DeviceArray<float> sq_d = dev_array(dev(), want_sq, "squared norms");
        DevMat cd(dev(), m);
        Dense<float> want_c = m;
        cpu_.clip_rows(max_norm, want_sq.data(), want_c.view());
        dev().clip_rows(max_norm, sq_d.data(), cd.view());
        const Dense<float> got_c = cd.get(m);
        ASSERT_TRUE(close_dense(want_c, got_c, 1e-6, 0.0, 0.0)) << what << " clip_rows";
        for (size_t r = 0; r < s.rows; ++r)
            for (size_t c = 0; c < s.cols; ++c)
                if (bits(want_c.at(r, c)) == bits(m.at(r, c))) {
                    ASSERT_EQ(bits(got_c.at(r, c)), bits(m.at(r, c))) << what << " clip_rows";
                }

        // The SoftMax composed on the device (rows without NaN/inf) vs the CPU's SoftMax.
        Dense<float> z = testing::random_dense<float>(s.rows, s.cols, 3, seed + 1, -30, 30, kPad);
        DevMat zd(dev(), z);
        dev().row_max(zd.cview(), out_d.data());
        DeviceArray<float> row_sum_d(dev(), s.rows + 1, "row sums");
        dev().exp_rows(out_d.data(), zd.view(), row_sum_d.data());
        dev().divide_rows(row_sum_d.data(), zd.view());
        Dense<float> want_z = z;
        cpu_.bias_activation_forward(softmax, nullptr, want_z.view());
        ASSERT_TRUE(close_dense(want_z, zd.get(z), 1e-5, 0.05)) << what << " composed SoftMax";
    }
}

// output_delta (SoftMax, multinomial CrossEntropy) on a column band of the targets with
// row_totals set, as element-wise output_delta (1e-5).

}  // namespace
}  // namespace sparsenet::parity
