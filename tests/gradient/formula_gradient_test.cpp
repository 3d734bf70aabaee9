// Finite-difference checks, in double, of the derivatives the CPU ops compute from the formulas
// in kernels/formulas/: every activation's backward (and SoftMax's Jacobian-vector product), and
// output_delta (scale 1) for every loss on every output activation, against central differences
// of the summed loss with respect to the pre-activation z.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/op_test_util.h"
#include "formulas/loss.h"

namespace sparsenet {
namespace {

using testing::Dense;

constexpr double kH = 1e-6;

// Relative tolerance ~1e-6 with a small absolute floor for derivatives that are exactly zero.
void expect_derivative(double analytic, double numeric, const std::string& what) {
    EXPECT_LE(std::fabs(analytic - numeric), 1e-6 * std::fabs(analytic) + 1e-8)
        << what << ": analytic " << analytic << " numeric " << numeric;
}

// Forward of one row of pre-activations (copied) through bias_activation_forward<double>.
std::vector<double> forward_row(Activation act, std::vector<double> z, const double* bias) {
    cpu::bias_activation_forward<double>(act, bias, {z.data(), 1, z.size(), z.size()}, 1);
    return z;
}

// ---- activations ----

TEST(FormulaGradient, ElementwiseActivationBackward) {
    for (Activation act : {Activation::kSigmoid, Activation::kTanh, Activation::kRectifiedLinear,
                           Activation::kLinear}) {
        const size_t rows = 3, cols = 7;
        std::mt19937_64 rng(int(act) + 1);
        std::uniform_real_distribution<double> u(-2.5, 2.5);
        Dense<double> z(rows, cols, 1), v(rows, cols, 2);
        std::vector<double> bias(cols);
        for (double& b : bias) b = u(rng) * 0.2;
        for (size_t r = 0; r < rows; ++r)
            for (size_t c = 0; c < cols; ++c) {
                double x = u(rng);
                // RectifiedLinear: keep z + bias away from the kink at 0.
                while (std::fabs(x + bias[c]) < 0.05) x = u(rng);
                z.at(r, c) = x;
                v.at(r, c) = u(rng);
            }
        // Analytic: a = f(z + bias); d = v * f'(a).
        Dense<double> a = z;
        cpu::bias_activation_forward<double>(act, bias.data(), a.mat(), 2);
        Dense<double> d = v;
        cpu::activation_backward<double>(act, a.cmat(), d.mat(), 2);
        // Numeric: d/dz of sum_c v[r, c] f(z[r, c] + bias[c]).
        for (size_t r = 0; r < rows; ++r)
            for (size_t c = 0; c < cols; ++c) {
                auto objective = [&](double zc) {
                    std::vector<double> row(&z.at(r, 0), &z.at(r, 0) + cols);
                    row[c] = zc;
                    const std::vector<double> ar = forward_row(act, row, bias.data());
                    double s = 0;
                    for (size_t j = 0; j < cols; ++j) s += v.at(r, j) * ar[j];
                    return s;
                };
                const double num =
                    (objective(z.at(r, c) + kH) - objective(z.at(r, c) - kH)) / (2 * kH);
                expect_derivative(d.at(r, c), num,
                                  std::string(to_string(act)) + " at " + std::to_string(r) + "," +
                                      std::to_string(c));
            }
    }
}

// SoftMax's Jacobian is applied by output_delta as a_k (g_k - sum_j g_j a_j): check that
// vector-Jacobian product against d/dz_k of sum_j g_j softmax(z)_j.
TEST(FormulaGradient, SoftMaxJacobianVectorProduct) {
    std::mt19937_64 rng(17);
    std::uniform_real_distribution<double> u(-3, 3);
    for (size_t n : {1, 2, 9}) {
        std::vector<double> z(n), g(n), bias(n);
        for (size_t j = 0; j < n; ++j) {
            z[j] = u(rng);
            g[j] = u(rng);
            bias[j] = 0.1 * u(rng);
        }
        const std::vector<double> a = forward_row(Activation::kSoftMax, z, bias.data());
        double dot = 0;
        for (size_t j = 0; j < n; ++j) dot += g[j] * a[j];
        for (size_t k = 0; k < n; ++k) {
            auto objective = [&](double zk) {
                std::vector<double> zz = z;
                zz[k] = zk;
                const std::vector<double> aa = forward_row(Activation::kSoftMax, zz, bias.data());
                double s = 0;
                for (size_t j = 0; j < n; ++j) s += g[j] * aa[j];
                return s;
            };
            const double num = (objective(z[k] + kH) - objective(z[k] - kH)) / (2 * kH);
            expect_derivative(formulas::softmax_delta_element(a[k], g[k], dot), num,
                              "SoftMax n=" + std::to_string(n) + " k=" + std::to_string(k));
        }
    }
}

// ---- losses x output activations ----

struct LossCase {
    Activation act;
    ErrorFunction loss;
    bool multinomial;
    bool valued;
};

// Pre-activation range keeping a = f(z) where the loss is smooth: CrossEntropy and SMCE take
// logs of a and 1 - a, so unbounded activations are kept inside (0, 1) there.
std::pair<double, double> z_range(const LossCase& c) {
    const bool needs_unit_interval = c.loss != ErrorFunction::kL2;
    switch (c.act) {
        case Activation::kSigmoid:
            return {-3.0, 3.0};
        case Activation::kTanh:
            return needs_unit_interval ? std::make_pair(0.1, 2.0) : std::make_pair(-2.0, 2.0);
        case Activation::kRectifiedLinear:
        case Activation::kLinear:
            return needs_unit_interval ? std::make_pair(0.05, 0.95) : std::make_pair(-2.0, 2.0);
        case Activation::kSoftMax:
            return {-3.0, 3.0};
    }
    return {-1.0, 1.0};
}

void check_loss_case(const LossCase& c) {
    const size_t rows = 4, n = 7;
    const std::string what = std::string(to_string(c.act)) + " + " + to_string(c.loss) +
                             (c.multinomial ? " multinomial" : "") +
                             (c.valued ? " valued" : " boolean");
    formulas::LossParams p;
    p.kind = c.loss;
    p.multinomial = c.multinomial;
    p.one_target = 0.7f;
    p.zero_target = 0.25f;
    p.one_scale = 1.5f;
    p.zero_scale = 0.5f;

    // Sparse targets: three stored entries per row (of a dataset with one extra leading row,
    // so the batch starts at first_row 1).
    Dataset t;
    t.rows = rows + 1;
    t.cols = n;
    t.offsets = {0};
    std::mt19937_64 rng(int(c.act) * 10 + int(c.loss) + (c.multinomial ? 100 : 0) +
                        (c.valued ? 1000 : 0));
    for (size_t r = 0; r < t.rows; ++r) {
        std::set<uint32_t> cols;
        while (cols.size() < 3) cols.insert(uint32_t(rng() % n));
        for (uint32_t col : cols) {
            t.indices.push_back(col);
            if (c.valued) t.values.push_back(0.2f + float(rng() % 70) / 100.0f);
        }
        t.offsets.push_back(t.indices.size());
    }
    const testing::TestBatch batch = testing::make_batch(t.rows, rows, false, 0);
    std::vector<double> values_d;
    const cpu::CsrT<double> target = testing::csr_view_d(t, batch, values_d);
    auto target_of = [&](size_t r, size_t j) {
        const uint64_t ex = batch.example(r);
        for (uint64_t e = t.offsets[ex]; e < t.offsets[ex + 1]; ++e)
            if (t.indices[e] == j) return testing::entry_value(t, e);
        return 0.0;
    };

    // Pre-activations; for SMCE, resample until no activation sits within 1e-3 of a margin
    // (the loss jumps there) and both sides of the margins are populated.
    const auto [lo, hi] = z_range(c);
    std::uniform_real_distribution<double> u(lo, hi);
    Dense<double> z(rows, n, 1), a;
    for (int attempt = 0;; ++attempt) {
        ASSERT_LT(attempt, 1000) << what << ": could not draw SMCE activations";
        for (size_t r = 0; r < rows; ++r)
            for (size_t j = 0; j < n; ++j) z.at(r, j) = u(rng);
        a = z;
        cpu::bias_activation_forward<double>(c.act, nullptr, a.mat(), 1);
        if (c.loss != ErrorFunction::kScaledMarginalCrossEntropy) break;
        bool near_margin = false;
        int active = 0, inactive = 0;
        for (size_t r = 0; r < rows; ++r)
            for (size_t j = 0; j < n; ++j) {
                const double aj = a.at(r, j);
                const double margin = target_of(r, j) != 0 ? p.one_target : p.zero_target;
                near_margin |= std::fabs(aj - margin) < 1e-3;
                const bool is_active = target_of(r, j) != 0 ? aj < margin : aj > margin;
                (is_active ? active : inactive)++;
            }
        if (!near_margin && active > 0 && inactive > 0) break;
    }

    // Analytic: output_delta<double> with scale 1.
    Dense<double> delta(rows, n, 2);
    std::vector<double> scratch;
    double total_loss = 0;
    cpu::output_delta<double>(p, c.act, a.cmat(), target, 1.0, delta.mat(), &total_loss, scratch,
                              1);
    ASSERT_TRUE(std::isfinite(total_loss)) << what;

    // Numeric: central differences of one row's summed loss (forward, then output_delta's
    // loss_sum on a one-row batch).
    auto row_loss = [&](size_t r, std::vector<double> zr) {
        cpu::bias_activation_forward<double>(c.act, nullptr, {zr.data(), 1, n, n}, 1);
        cpu::CsrT<double> one = target;
        one.rows = nullptr;
        one.first_row = batch.example(r);
        one.batch = 1;
        std::vector<double> d(n);
        std::vector<double> s;
        double loss = 0;
        cpu::output_delta<double>(p, c.act, {zr.data(), 1, n, n}, one, 1.0, {d.data(), 1, n, n},
                                  &loss, s, 1);
        return loss;
    };
    double sum_rows = 0;
    for (size_t r = 0; r < rows; ++r) {
        const std::vector<double> zr(&z.at(r, 0), &z.at(r, 0) + n);
        sum_rows += row_loss(r, zr);
        for (size_t j = 0; j < n; ++j) {
            std::vector<double> plus = zr, minus = zr;
            plus[j] += kH;
            minus[j] -= kH;
            const double num = (row_loss(r, plus) - row_loss(r, minus)) / (2 * kH);
            expect_derivative(delta.at(r, j), num,
                              what + " at " + std::to_string(r) + "," + std::to_string(j) +
                                  " (a=" + std::to_string(a.at(r, j)) +
                                  ", t=" + std::to_string(target_of(r, j)) + ")");
        }
    }
    EXPECT_NEAR(sum_rows, total_loss, 1e-12 * std::fabs(total_loss) + 1e-12) << what;

    // The scale multiplies the delta only.
    Dense<double> scaled(rows, n, 2);
    double unused = 0;
    cpu::output_delta<double>(p, c.act, a.cmat(), target, 0.25, scaled.mat(), &unused, scratch, 2);
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < n; ++j) EXPECT_DOUBLE_EQ(scaled.at(r, j), 0.25 * delta.at(r, j));
    EXPECT_DOUBLE_EQ(unused, total_loss);
}

TEST(FormulaGradient, OutputDeltaIsTheGradientOfTheLoss) {
    int cases = 0;
    for (Activation act : {Activation::kSigmoid, Activation::kTanh, Activation::kRectifiedLinear,
                           Activation::kLinear, Activation::kSoftMax})
        for (ErrorFunction loss : {ErrorFunction::kL2, ErrorFunction::kCrossEntropy,
                                   ErrorFunction::kScaledMarginalCrossEntropy})
            for (bool valued : {false, true}) {
                check_loss_case({act, loss, false, valued});
                ++cases;
            }
    for (bool valued : {false, true}) {
        check_loss_case({Activation::kSoftMax, ErrorFunction::kCrossEntropy, true, valued});
        ++cases;
    }
    EXPECT_EQ(cases, 32);
}

}  // namespace
}  // namespace sparsenet
