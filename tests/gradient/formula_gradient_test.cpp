// Finite-difference checks, in double, of the derivatives the CPU ops compute from the formulas
// in kernels/formulas/: every activation's backward (and SoftMax's Jacobian-vector product), with
// and without a dropout mask (inverted and alpha dropout), output_delta (scale 1) for every loss
// on every output activation it is valid with (with and without SparseIgnoreZero), and the
// sparseness penalty, against central differences of the summed objective.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/op_test_util.h"
#include "formulas/dropout.h"
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

using formulas::ActivationParams;

constexpr int kActivations = int(Activation::kSoftSign) + 1;
constexpr int kLosses = int(ErrorFunction::kDataScaledMarginalCrossEntropy) + 1;

// Parameters away from DSSTNE's defaults, so a formula that ignores one fails.
ActivationParams params(Activation kind) {
    ActivationParams p;
    p.kind = kind;
    p.slope = 0.2f;
    p.alpha = 0.7f;
    p.lambda = 1.3f;
    return p;
}

std::vector<ActivationParams> elementwise() {
    std::vector<ActivationParams> v;
    for (int k = 0; k < kActivations; ++k)
        if (Activation(k) != Activation::kSoftMax) v.push_back(params(Activation(k)));
    return v;
}

bool has_kink_at_zero(Activation act) {
    return act == Activation::kRectifiedLinear || act == Activation::kLeakyRectifiedLinear ||
           act == Activation::kExponentialLinear || act == Activation::kScaledExponentialLinear ||
           act == Activation::kSoftSign;
}

// Forward of one row of pre-activations (copied) through bias_activation_forward<double>.
std::vector<double> forward_row(const ActivationParams& act, std::vector<double> z,
                                const double* bias) {
    cpu::bias_activation_forward<double>(act, bias, {z.data(), 1, z.size(), z.size()}, 1);
    return z;
}

// ---- activations ----

TEST(FormulaGradient, ElementwiseActivationBackward) {
    for (const ActivationParams& act : elementwise()) {
        const size_t rows = 3, cols = 7;
        std::mt19937_64 rng(int(act.kind) + 1);
        std::uniform_real_distribution<double> u(-2.5, 2.5);
        Dense<double> z(rows, cols, 1), v(rows, cols, 2);
        std::vector<double> bias(cols);
        for (double& b : bias) b = u(rng) * 0.2;
        for (size_t r = 0; r < rows; ++r)
            for (size_t c = 0; c < cols; ++c) {
                double x = u(rng);
                // The ReLU family: keep z + bias away from the kink at 0.
                while (has_kink_at_zero(act.kind) && std::fabs(x + bias[c]) < 0.05) x = u(rng);
                z.at(r, c) = x;
                v.at(r, c) = u(rng);
            }
        // Analytic: a = f(z + bias); d = v * f'(a).
        Dense<double> a = z;
        cpu::bias_activation_forward<double>(act, bias.data(), a.mat(), 2);
        Dense<double> d = v;
        cpu::activation_backward<double>(act, a.cmat(), nullptr, d.mat(), 2);
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
                                  std::string(to_string(act.kind)) + " at " + std::to_string(r) +
                                      "," + std::to_string(c));
            }
    }
}

// Backward through dropout: the objective is sum v * dropout(f(z + bias)) with a fixed mask
// (inverted and alpha dropout); activation_backward with the mask must give its gradient in z.
TEST(FormulaGradient, ActivationBackwardThroughDropout) {
    for (const ActivationParams& act : elementwise())
        for (bool alpha : {false, true}) {
            const size_t rows = 4, cols = 9;
            std::mt19937_64 rng(int(act.kind) * 7 + (alpha ? 3 : 0));
            std::uniform_real_distribution<double> u(-2.5, 2.5);
            std::vector<uint32_t> ids = {5, 2, 8, 11};
            DropoutMask mask;
            mask.rows.rows = ids.data();
            mask.rows.batch = rows;
            mask.col_offset = 4;
            mask.params = alpha ? formulas::alpha_dropout(0.35f, 123, -1.3f * 0.7f)
                                : formulas::inverted_dropout(0.35f, 123);
            Dense<double> z(rows, cols), v(rows, cols);
            for (size_t r = 0; r < rows; ++r)
                for (size_t c = 0; c < cols; ++c) {
                    double x = u(rng);
                    while (has_kink_at_zero(act.kind) && std::fabs(x) < 0.05) x = u(rng);
                    z.at(r, c) = x;
                    v.at(r, c) = u(rng);
                }
            auto forward = [&](Dense<double> m) {
                cpu::bias_activation_forward<double>(act, nullptr, m.mat(), 1);
                cpu::dropout<double>(mask, m.mat(), 1);
                return m;
            };
            const Dense<double> y = forward(z);
            Dense<double> d = v;
            cpu::activation_backward<double>(act, y.cmat(), &mask, d.mat(), 1);
            int dropped = 0;
            for (size_t r = 0; r < rows; ++r)
                for (size_t c = 0; c < cols; ++c) {
                    auto objective = [&](double zc) {
                        Dense<double> zz = z;
                        zz.at(r, c) = zc;
                        const Dense<double> yy = forward(zz);
                        double s = 0;
                        for (size_t i = 0; i < rows; ++i)
                            for (size_t j = 0; j < cols; ++j) s += v.at(i, j) * yy.at(i, j);
                        return s;
                    };
                    const double num =
                        (objective(z.at(r, c) + kH) - objective(z.at(r, c) - kH)) / (2 * kH);
                    dropped += !formulas::keep_unit(123, ids[r], 4 + c, 0.35f);
                    expect_derivative(d.at(r, c), num,
                                      std::string(to_string(act.kind)) +
                                          (alpha ? " alpha" : " inverted") + " at " +
                                          std::to_string(r) + "," + std::to_string(c));
                }
            EXPECT_GT(dropped, 0) << "no unit was dropped";
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
        const std::vector<double> a = forward_row(params(Activation::kSoftMax), z, bias.data());
        double dot = 0;
        for (size_t j = 0; j < n; ++j) dot += g[j] * a[j];
        for (size_t k = 0; k < n; ++k) {
            auto objective = [&](double zk) {
                std::vector<double> zz = z;
                zz[k] = zk;
                const std::vector<double> aa =
                    forward_row(params(Activation::kSoftMax), zz, bias.data());
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
    bool ignore_zero;
};

bool log_loss(ErrorFunction loss) {
    return loss == ErrorFunction::kCrossEntropy ||
           loss == ErrorFunction::kScaledMarginalCrossEntropy ||
           loss == ErrorFunction::kDataScaledMarginalCrossEntropy;
}

// Pre-activation range keeping a = f(z) where the loss is smooth: the cross-entropy family takes
// logs of a and 1 - a, so unbounded activations are kept inside (0, 1) there.
std::pair<double, double> z_range(const LossCase& c) {
    const bool unit = log_loss(c.loss);
    switch (c.act) {
        case Activation::kSigmoid:
        case Activation::kSoftMax:
            return {-3.0, 3.0};
        case Activation::kTanh:
            return unit ? std::make_pair(0.1, 2.0) : std::make_pair(-2.0, 2.0);
        case Activation::kRectifiedLinear:
        case Activation::kLinear:
        case Activation::kLeakyRectifiedLinear:
        case Activation::kExponentialLinear:
            return unit ? std::make_pair(0.05, 0.95) : std::make_pair(-2.0, 2.0);
        case Activation::kScaledExponentialLinear:  // lambda 1.3
            return unit ? std::make_pair(0.05, 0.7) : std::make_pair(-2.0, 2.0);
        case Activation::kSoftPlus:  // softplus(0.4) = 0.91
            return unit ? std::make_pair(-3.0, 0.4) : std::make_pair(-3.0, 3.0);
        case Activation::kSoftSign:
            return unit ? std::make_pair(0.05, 5.0) : std::make_pair(-4.0, 4.0);
    }
    return {-1.0, 1.0};
}

// Distance from (z, a, t) to the nearest point where the loss or the activation has a kink (or,
// for the SMCE family, a jump): central differences are only checked away from those.
double kink_distance(const LossCase& c, const formulas::LossParams& p, double z, double a,
                     double t) {
    double d = 1e9;
    if (has_kink_at_zero(c.act)) d = std::min(d, std::fabs(z));
    // A ReLU unit at z < 0 is locally constant: the loss cannot change there.
    if (c.act == Activation::kRectifiedLinear && z < 0) return d;
    switch (c.loss) {
        case ErrorFunction::kL1:
            d = std::min(d, std::fabs(a - t));
            break;
        case ErrorFunction::kL2Hinge:
            d = std::min(d, std::fabs(a - (t > 0 ? t : std::fabs(t))));
            break;
        case ErrorFunction::kHinge:
            d = std::min(d, std::fabs(1.0 - (t > 0 ? 1.0 : -1.0) * a));
            break;
        case ErrorFunction::kScaledMarginalCrossEntropy:
        case ErrorFunction::kDataScaledMarginalCrossEntropy:
            d = std::min(d, std::fabs(a - (t != 0 ? p.one_target : p.zero_target)));
            break;
        default:
            break;
    }
    return d;
}

void check_loss_case(const LossCase& c) {
    const size_t rows = 4, n = 7;
    const std::string what = std::string(to_string(c.act)) + " + " + to_string(c.loss) +
                             (c.multinomial ? " multinomial" : "") +
                             (c.valued ? " valued" : " boolean") +
                             (c.ignore_zero ? " ignore-zero" : "");
    formulas::LossParams p;
    p.kind = c.loss;
    p.multinomial = c.multinomial;
    p.ignore_zero = c.ignore_zero;
    p.one_target = 0.7f;
    p.zero_target = 0.25f;
    p.one_scale = 1.5f;
    p.zero_scale = 0.5f;
    const ActivationParams act = params(c.act);

    // Sparse targets: three stored entries per row (of a dataset with one extra leading row,
    // so the batch starts at first_row 1). Valued targets include negative ones where the loss
    // reads the sign (L2Hinge, Hinge).
    Dataset t;
    t.rows = rows + 1;
    t.cols = n;
    t.offsets = {0};
    std::mt19937_64 rng(int(c.act) * 10 + int(c.loss) * 1000 + (c.multinomial ? 100 : 0) +
                        (c.valued ? 7 : 0) + (c.ignore_zero ? 50000 : 0));
    const bool signed_targets = c.loss == ErrorFunction::kL2Hinge ||
                                c.loss == ErrorFunction::kHinge || c.loss == ErrorFunction::kL1 ||
                                c.loss == ErrorFunction::kL2;
    for (size_t r = 0; r < t.rows; ++r) {
        std::set<uint32_t> cols;
        while (cols.size() < 3) cols.insert(uint32_t(rng() % n));
        for (uint32_t col : cols) {
            t.indices.push_back(col);
            if (c.valued) {
                float v = 0.2f + float(rng() % 70) / 100.0f;
                if (signed_targets && rng() % 3 == 0) v = -v;
                t.values.push_back(v);
            }
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

    // Pre-activations; resample until no unit sits within 1e-3 of a kink or margin and, for the
    // SMCE family, both sides of the margins are populated.
    const auto [lo, hi] = z_range(c);
    std::uniform_real_distribution<double> u(lo, hi);
    Dense<double> z(rows, n, 1), a;
    for (int attempt = 0;; ++attempt) {
        ASSERT_LT(attempt, 5000) << what << ": could not draw activations away from kinks";
        for (size_t r = 0; r < rows; ++r)
            for (size_t j = 0; j < n; ++j) z.at(r, j) = u(rng);
        a = z;
        cpu::bias_activation_forward<double>(act, nullptr, a.mat(), 1);
        bool near_kink = false;
        int active = 0, inactive = 0;
        for (size_t r = 0; r < rows; ++r)
            for (size_t j = 0; j < n; ++j) {
                const double aj = a.at(r, j), tj = target_of(r, j);
                near_kink |=
                    c.act != Activation::kSoftMax && kink_distance(c, p, z.at(r, j), aj, tj) < 1e-3;
                near_kink |=
                    c.act == Activation::kSoftMax && kink_distance(c, p, 1.0, aj, tj) < 1e-3;
                if (c.loss == ErrorFunction::kScaledMarginalCrossEntropy ||
                    c.loss == ErrorFunction::kDataScaledMarginalCrossEntropy) {
                    const bool is_active = tj != 0 ? aj < p.one_target : aj > p.zero_target;
                    (is_active ? active : inactive)++;
                }
            }
        const bool smce = c.loss == ErrorFunction::kScaledMarginalCrossEntropy ||
                          c.loss == ErrorFunction::kDataScaledMarginalCrossEntropy;
        if (!near_kink && (!smce || (active > 0 && inactive > 0))) break;
    }

    // Analytic: output_delta<double> with scale 1.
    Dense<double> delta(rows, n, 2);
    std::vector<double> scratch;
    double total_loss = 0;
    cpu::output_delta<double>(p, act, a.cmat(), target, 1.0, delta.mat(), &total_loss, scratch, 1);
    ASSERT_TRUE(std::isfinite(total_loss)) << what;

    // Numeric: central differences of one row's summed loss (forward, then output_delta's
    // loss_sum on a one-row batch).
    auto row_loss = [&](size_t r, std::vector<double> zr) {
        cpu::bias_activation_forward<double>(act, nullptr, {zr.data(), 1, n, n}, 1);
        cpu::CsrT<double> one = target;
        one.rows = nullptr;
        one.first_row = batch.example(r);
        one.batch = 1;
        std::vector<double> d(n);
        std::vector<double> s;
        double loss = 0;
        cpu::output_delta<double>(p, act, {zr.data(), 1, n, n}, one, 1.0, {d.data(), 1, n, n},
                                  &loss, s, 1);
        return loss;
    };
    double sum_rows = 0;
    int nonzero = 0;
    for (size_t r = 0; r < rows; ++r) {
        const std::vector<double> zr(&z.at(r, 0), &z.at(r, 0) + n);
        sum_rows += row_loss(r, zr);
        for (size_t j = 0; j < n; ++j) {
            std::vector<double> plus = zr, minus = zr;
            plus[j] += kH;
            minus[j] -= kH;
            const double num = (row_loss(r, plus) - row_loss(r, minus)) / (2 * kH);
            nonzero += num != 0.0;
            expect_derivative(delta.at(r, j), num,
                              what + " at " + std::to_string(r) + "," + std::to_string(j) +
                                  " (a=" + std::to_string(a.at(r, j)) +
                                  ", t=" + std::to_string(target_of(r, j)) + ")");
        }
    }
    EXPECT_GT(nonzero, 0) << what << ": every derivative is zero";
    EXPECT_NEAR(sum_rows, total_loss, 1e-12 * std::fabs(total_loss) + 1e-12) << what;

    // The scale multiplies the delta only.
    Dense<double> scaled(rows, n, 2);
    double unused = 0;
    cpu::output_delta<double>(p, act, a.cmat(), target, 0.25, scaled.mat(), &unused, scratch, 2);
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < n; ++j) EXPECT_DOUBLE_EQ(scaled.at(r, j), 0.25 * delta.at(r, j));
    EXPECT_DOUBLE_EQ(unused, total_loss);
}

// Every loss with every output activation it is valid with: all pairs, except
// DataScaledMarginalCrossEntropy with SoftMax (refused by the config, as in DSSTNE), plus the
// multinomial cross-entropy on SoftMax; each with and without SparseIgnoreZero.
TEST(FormulaGradient, OutputDeltaIsTheGradientOfTheLoss) {
    int cases = 0;
    for (bool ignore_zero : {false, true}) {
        for (int act = 0; act < kActivations; ++act)
            for (int loss = 0; loss < kLosses; ++loss) {
                if (Activation(act) == Activation::kSoftMax &&
                    ErrorFunction(loss) == ErrorFunction::kDataScaledMarginalCrossEntropy)
                    continue;
                for (bool valued : {false, true}) {
                    check_loss_case(
                        {Activation(act), ErrorFunction(loss), false, valued, ignore_zero});
                    ++cases;
                }
            }
        for (bool valued : {false, true}) {
            check_loss_case(
                {Activation::kSoftMax, ErrorFunction::kCrossEntropy, true, valued, ignore_zero});
            ++cases;
        }
    }
    EXPECT_EQ(cases, 2 * ((kActivations * kLosses - 1) * 2 + 2));
}

// ---- sparseness penalty ----

// The op adds scale * d(penalty)/da to delta and rows * penalty to the loss; with scale = 1/rows
// the delta is the gradient of loss/rows = beta * sum_j KL(p || mean_b a[b, j]).
TEST(FormulaGradient, SparsenessPenaltyIsTheGradientOfItsLoss) {
    for (double p : {0.0, 0.05, 0.5, 1.0})
        for (size_t rows : {1, 3, 8}) {
            const size_t cols = 5;
            const double beta = 1.7;
            Dense<double> a =
                testing::random_dense<double>(rows, cols, 1, rows * 10 + 1, 0.05, 0.95);
            auto objective = [&](const Dense<double>& m) {
                double loss = 0;
                std::vector<double> scratch;
                cpu::sparseness_penalty<double>(float(p), float(beta), m.cmat(), 0.0,
                                                cpu::MatT<double>{}, &loss, scratch, 1);
                return loss / double(rows);
            };
            Dense<double> delta = testing::random_dense<double>(rows, cols, 0, 3, -1, 1);
            const Dense<double> d0 = delta;
            std::vector<double> scratch;
            double loss = 0;
            cpu::sparseness_penalty<double>(float(p), float(beta), a.cmat(), 1.0 / double(rows),
                                            delta.mat(), &loss, scratch, 2);
            EXPECT_NEAR(loss / double(rows), objective(a), 1e-14);
            for (size_t r = 0; r < rows; ++r)
                for (size_t c = 0; c < cols; ++c) {
                    Dense<double> plus = a, minus = a;
                    plus.at(r, c) += kH;
                    minus.at(r, c) -= kH;
                    const double num = (objective(plus) - objective(minus)) / (2 * kH);
                    expect_derivative(delta.at(r, c) - d0.at(r, c), num,
                                      "p=" + std::to_string(p) + " rows=" + std::to_string(rows) +
                                          " at " + std::to_string(r) + "," + std::to_string(c));
                }
        }
}

}  // namespace
}  // namespace sparsenet
