// output_delta: the sparse-target delta and loss (zero-target pass + corrections, or the stored
// entries only with SparseIgnoreZero) against a reference that densifies the targets and
// evaluates the formulas everywhere in double.
// The formulas themselves are checked against finite differences in
// tests/gradient/formula_gradient_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops_sparse.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/loss.h"

namespace sparsenet {
namespace {

using testing::Dense;

struct Combo {
    Activation act;
    ErrorFunction loss;
    bool multinomial;
    bool ignore_zero = false;
};

constexpr int kActivations = int(Activation::kSoftSign) + 1;
constexpr int kLosses = int(ErrorFunction::kDataScaledMarginalCrossEntropy) + 1;

std::vector<Combo> all_combos(bool ignore_zero = false) {
    std::vector<Combo> v;
    for (int act = 0; act < kActivations; ++act)
        for (int loss = 0; loss < kLosses; ++loss)
            v.push_back({Activation(act), ErrorFunction(loss), false, ignore_zero});
    v.push_back({Activation::kSoftMax, ErrorFunction::kCrossEntropy, true, ignore_zero});
    return v;
}

formulas::ActivationParams act_params(Activation kind) {
    formulas::ActivationParams p;
    p.kind = kind;
    p.slope = 0.2f;
    p.alpha = 0.8f;
    p.lambda = 1.1f;
    return p;
}

std::string combo_name(const Combo& c) {
    return std::string(to_string(c.act)) + "/" + to_string(c.loss) +
           (c.multinomial ? " multinomial" : "") + (c.ignore_zero ? " ignore-zero" : "");
}

struct DeltaCase {
    size_t batch = 7;
    uint32_t width = 5;
    testing::RowShape shape = testing::RowShape::kUniform;
    bool valued = false;
    bool permuted = false;
    Combo combo{Activation::kSigmoid, ErrorFunction::kCrossEntropy, false};
    float scale = 0.5f;
    uint64_t seed = 1;
};

struct DeltaResult {
    std::vector<float> delta;
    double loss = 0;
};

void run_and_check(Backend& backend, const DeltaCase& c, const std::string& what,
                   DeltaResult* result = nullptr) {
    const Dataset targets =
        testing::random_dataset(c.batch + 2, c.width, c.shape, c.valued, c.seed);
    const testing::TestBatch batch = testing::make_batch(targets.rows, c.batch, c.permuted, c.seed);
    // Activations: the forward of random pre-activations, so each lies in its function's range.
    Dense<float> a = testing::random_dense<float>(c.batch, c.width, 2, c.seed + 1, -3, 3);
    const formulas::ActivationParams act = act_params(c.combo.act);
    backend.bias_activation_forward(act, nullptr, a.view());
    const float kPad = -42.0f;
    Dense<float> delta(c.batch, c.width, 1, kPad);
    formulas::LossParams p;
    p.kind = c.combo.loss;
    p.multinomial = c.combo.multinomial;
    p.ignore_zero = c.combo.ignore_zero;
    p.one_target = 0.8f;
    p.zero_target = 0.2f;
    p.one_scale = 1.5f;
    p.zero_scale = 0.75f;

    const double kStart = 1.25;
    double loss_sum = kStart;
    backend.output_delta(p, act, a.cview(), testing::csr_view(targets, batch), c.scale,
                         delta.view(), &loss_sum);

    // Reference: dense targets, every unit evaluated with its own target.
    double ref_loss = 0, loss_mag = 0;
    for (size_t b = 0; b < c.batch; ++b) {
        std::vector<double> t(c.width, 0.0);
        std::vector<bool> stored(c.width, false);
        const uint64_t ex = batch.example(b);
        for (uint64_t e = targets.offsets[ex]; e < targets.offsets[ex + 1]; ++e) {
            t[targets.indices[e]] = testing::entry_value(targets, e);
            stored[targets.indices[e]] = true;
        }
        // SparseIgnoreZero: absent targets neither count in the loss nor pass a gradient.
        auto counts = [&](size_t j) { return !c.combo.ignore_zero || stored[j]; };
        std::vector<double> want(c.width), mag(c.width);
        if (c.combo.act == Activation::kSoftMax) {
            double tsum = 0, dot = 0, dot_mag = 0;
            std::vector<double> g(c.width);
            for (size_t j = 0; j < c.width; ++j) {
                tsum += t[j];
                g[j] = counts(j) ? formulas::loss_grad_element<double>(p, a.at(b, j), t[j]) : 0.0;
                dot += g[j] * a.at(b, j);
                dot_mag += std::fabs(g[j] * a.at(b, j));
            }
            for (size_t j = 0; j < c.width; ++j) {
                const double aj = a.at(b, j);
                if (c.combo.multinomial) {
                    want[j] = formulas::multinomial_delta_element<double>(aj, t[j], tsum);
                    mag[j] = std::fabs(aj * tsum) + std::fabs(t[j]);
                } else {
                    want[j] = formulas::softmax_delta_element<double>(aj, g[j], dot);
                    mag[j] = std::fabs(aj) * (std::fabs(g[j]) + dot_mag);
                }
            }
        } else {
            for (size_t j = 0; j < c.width; ++j) {
                want[j] = counts(j)
                              ? formulas::output_delta_element<double>(p, act, a.at(b, j), t[j])
                              : 0.0;
                mag[j] = std::fabs(want[j]);
            }
        }
        for (size_t j = 0; j < c.width; ++j) {
            const double l = counts(j) ? formulas::loss_element<double>(p, a.at(b, j), t[j]) : 0.0;
            ref_loss += l;
            loss_mag += std::fabs(l);
            const double w = c.scale * want[j];
            ASSERT_TRUE(testing::near(delta.at(b, j), w, c.scale * mag[j], 2e-5, 1e-6))
                << what << " at " << b << "," << j << " got " << delta.at(b, j) << " want " << w
                << " (a=" << a.at(b, j) << " t=" << t[j] << ")";
        }
        ASSERT_EQ(delta.at(b, c.width), kPad) << what << " padding";
    }
    ASSERT_TRUE(testing::near(loss_sum - kStart, ref_loss, loss_mag, 1e-5, 1e-6))
        << what << " loss got " << loss_sum - kStart << " want " << ref_loss;

    // Without a loss pointer the delta is the same.
    Dense<float> delta2(c.batch, c.width, 1, kPad);
    backend.output_delta(p, act, a.cview(), testing::csr_view(targets, batch), c.scale,
                         delta2.view(), nullptr);
    ASSERT_EQ(0, std::memcmp(delta.data.data(), delta2.data.data(), delta.data.size() * 4)) << what;
    if (result != nullptr) {
        result->delta = delta.data;
        result->loss = loss_sum;
    }
}

TEST(OutputDelta, MatchesDenseReferenceOverGrid) {
    CpuBackend backend(2);
    int cases = 0;
    for (const Combo& combo : all_combos())
        for (size_t batch : {1, 7, 64})
            for (uint32_t width : {1u, 5u, 130u})
                for (testing::RowShape shape : testing::kAllShapes)
                    for (bool valued : {false, true})
                        for (bool permuted : {false, true}) {
                            DeltaCase c;
                            c.batch = batch;
                            c.width = width;
                            c.shape = shape;
                            c.valued = valued;
                            c.permuted = permuted;
                            c.combo = combo;
                            c.seed = 500 + cases;
                            run_and_check(
                                backend, c,
                                combo_name(combo) + " " +
                                    testing::case_name(shape, valued, batch, width, permuted));
                            if (HasFatalFailure()) return;
                            ++cases;
                        }
    EXPECT_EQ(cases, (kActivations * kLosses + 1) * 3 * 3 * 4 * 2 * 2);
}

TEST(OutputDelta, SparseIgnoreZeroMatchesDenseReference) {
    CpuBackend backend(2);
    int cases = 0;
    for (const Combo& combo : all_combos(true))
        for (size_t batch : {1, 7})
            for (uint32_t width : {5u, 130u})
                for (testing::RowShape shape : testing::kAllShapes)
                    for (bool valued : {false, true}) {
                        DeltaCase c;
                        c.batch = batch;
                        c.width = width;
                        c.shape = shape;
                        c.valued = valued;
                        c.permuted = (cases % 2) == 1;
                        c.combo = combo;
                        c.seed = 9000 + cases;
                        run_and_check(
                            backend, c,
                            combo_name(combo) + " " +
                                testing::case_name(shape, valued, batch, width, c.permuted));
                        if (HasFatalFailure()) return;
                        ++cases;
                    }
    EXPECT_EQ(cases, (kActivations * kLosses + 1) * 2 * 2 * 4 * 2);
}

// Known values with SparseIgnoreZero: Sigmoid + L2, one row storing columns 1 and 3.
TEST(OutputDelta, SparseIgnoreZeroKnownValues) {
    CpuBackend backend(1);
    Dataset t;
    t.rows = 1;
    t.cols = 4;
    t.offsets = {0, 2};
    t.indices = {1, 3};
    t.values = {1.0f, 0.5f};
    const testing::TestBatch batch = testing::make_batch(1, 1, false, 0);
    Dense<float> a(1, 4);
    const float av[] = {0.9f, 0.25f, 0.6f, 0.75f};
    for (size_t j = 0; j < 4; ++j) a.at(0, j) = av[j];
    formulas::LossParams p;
    p.kind = ErrorFunction::kL2;
    p.ignore_zero = true;
    Dense<float> delta(1, 4, 0, 99.0f);
    double loss = 0;
    backend.output_delta(p, act_params(Activation::kSigmoid), a.cview(),
                         testing::csr_view(t, batch), 1.0f, delta.view(), &loss);
    // delta = (a - t) a (1 - a) at stored entries, 0 elsewhere; loss = sum (a - t)^2 / 2 stored.
    EXPECT_EQ(delta.at(0, 0), 0.0f);
    EXPECT_NEAR(delta.at(0, 1), (0.25 - 1.0) * 0.25 * 0.75, 1e-7);
    EXPECT_EQ(delta.at(0, 2), 0.0f);
    EXPECT_NEAR(delta.at(0, 3), (0.75 - 0.5) * 0.75 * 0.25, 1e-7);
    EXPECT_NEAR(loss, 0.5 * (0.75 * 0.75 + 0.25 * 0.25), 1e-7);
}

// The logarithmic losses' zero-target pass takes one logarithm per product of four factors
// (cpu::zero_target_log_loss): against the sum of loss_element's terms in double, within 3e-7 of
// the terms' magnitude (four float roundings of the product and one of its logarithm against one
// of each term's logarithm), over the losses and margins, the log floor (a at 1 and beyond it),
// activations below the margin, and widths 0 to 9 and dsstne-bench's 27,278 (four quarters and a
// tail). Every other loss keeps loss_element's loop.
TEST(OutputDelta, ZeroTargetLossOfProductsMatchesTheTermsSum) {
    struct LossCase {
        ErrorFunction kind;
        float zero_target, zero_scale;
    };
    const LossCase losses[] = {{ErrorFunction::kCrossEntropy, 0.1f, 1.0f},
                               {ErrorFunction::kScaledMarginalCrossEntropy, 0.0f, 1.0f},
                               {ErrorFunction::kScaledMarginalCrossEntropy, 0.1f, 0.5f},
                               {ErrorFunction::kDataScaledMarginalCrossEntropy, 0.05f, 2.0f}};
    int checked = 0;
    for (const LossCase& lc : losses) {
        formulas::LossParams p;
        p.kind = lc.kind;
        p.zero_target = lc.zero_target;
        p.zero_scale = lc.zero_scale;
        ASSERT_TRUE(formulas::zero_loss_is_log(p));
        for (size_t n : {0, 1, 2, 3, 4, 5, 7, 8, 9, 27278}) {
            for (int fill = 0; fill < 3; ++fill) {  // random, all at the floor, all zero
                std::vector<float> a(n);
                uint64_t h = 0x9e3779b97f4a7c15ull * (n + 1) + uint64_t(fill);
                for (size_t j = 0; j < n; ++j) {
                    h = h * 6364136223846793005ull + 1442695040888963407ull;
                    const float u = float(h >> 40) / float(1u << 24);  // [0, 1)
                    if (fill == 1) {
                        a[j] = 1.0f - 1e-9f * float(j % 3);  // 1 - a below the floor: 1e-7
                    } else if (fill == 2) {
                        a[j] = 0.0f;
                    } else {
                        // Below the margin, near 1 (floored), and in between.
                        a[j] = j % 7 == 0 ? 0.02f * u : j % 11 == 0 ? 1.0f - 1e-8f * u : u;
                    }
                }
                double want = 0.0, mag = 0.0;
                for (size_t j = 0; j < n; ++j) {
                    const double term = double(formulas::loss_element(p, a[j], 0.0f));
                    want += term;
                    mag += std::fabs(term);
                }
                const double got = cpu::zero_target_log_loss(p, a.data(), n);
                ASSERT_TRUE(std::isfinite(got)) << n << " fill " << fill;
                ASSERT_NEAR(got, want, 3e-7 * mag + 1e-12)
                    << "loss " << int(lc.kind) << " n " << n << " fill " << fill;
                if (fill == 1 && n > 0) {
                    ASSERT_GT(got, 15.0 * double(n) * double(lc.zero_scale));  // -log(1e-7) each
                }
                ++checked;
            }
        }
    }
    EXPECT_EQ(checked, 4 * 10 * 3);
    formulas::LossParams multinomial;
    multinomial.multinomial = true;
    EXPECT_FALSE(formulas::zero_loss_is_log(multinomial));
    formulas::LossParams l2;
    l2.kind = ErrorFunction::kL2;
    EXPECT_FALSE(formulas::zero_loss_is_log(l2));
}

TEST(OutputDelta, DeterministicAcrossThreadCounts) {
    CpuBackend one(1), two(2);
    for (const Combo& combo : all_combos()) {
        DeltaCase c;
        c.batch = 300;
        c.width = 257;
        c.shape = testing::RowShape::kPowerLaw;
        c.valued = true;
        c.permuted = true;
        c.combo = combo;
        c.scale = 1.0f / 300;
        DeltaResult r1, r2;
        run_and_check(one, c, combo_name(combo) + " threads=1", &r1);
        run_and_check(two, c, combo_name(combo) + " threads=2", &r2);
        ASSERT_EQ(0, std::memcmp(&r1.loss, &r2.loss, sizeof(double))) << combo_name(combo);
        ASSERT_EQ(0, std::memcmp(r1.delta.data(), r2.delta.data(), r1.delta.size() * 4))
            << combo_name(combo);
    }
}

TEST(OutputDelta, TargetsOnlyCorrectTheirOwnRow) {
    // One-hot targets on a Sigmoid/CE output: delta = a - t exactly where stored.
    CpuBackend backend(1);
    Dataset t;
    t.rows = 2;
    t.cols = 4;
    t.offsets = {0, 1, 3};
    t.indices = {2, 0, 3};
    const testing::TestBatch batch = testing::make_batch(2, 2, false, 0);
    Dense<float> a(2, 4, 0, 0.25f);
    Dense<float> delta(2, 4);
    formulas::LossParams p;
    p.kind = ErrorFunction::kCrossEntropy;
    backend.output_delta(p, act_params(Activation::kSigmoid), a.cview(),
                         testing::csr_view(t, batch), 1.0f, delta.view(), nullptr);
    const float want[2][4] = {{0.25f, 0.25f, -0.75f, 0.25f}, {-0.75f, 0.25f, 0.25f, -0.75f}};
    for (size_t b = 0; b < 2; ++b)
        for (size_t j = 0; j < 4; ++j) EXPECT_EQ(delta.at(b, j), want[b][j]) << b << "," << j;
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

TEST_F(CudaParity, OutputDeltaWithRowTotalsOnAColumnBand) {
    formulas::ActivationParams act;
    act.kind = Activation::kSoftMax;
    formulas::LossParams loss;
    loss.kind = ErrorFunction::kCrossEntropy;
    loss.multinomial = true;
    int cases = 0;
    for (uint32_t n : {9u, 1000u})
        for (RowShape shape : testing::kAllShapes)
            for (bool valued : {false, true}) {
                const uint64_t seed = uint64_t(++cases) * 37;
                const size_t rows = 17;
                const Dataset t = testing::random_dataset(rows + 5, n, shape, valued, seed);
                const TestBatch batch = testing::make_batch(t.rows, rows, true, seed + 1);
                // The band [c0, n) renumbered from 0, and the whole rows' target sums.
                const uint32_t c0 = n / 3;
                Dataset tb;
                tb.rows = t.rows;
                tb.cols = n - c0;
                std::vector<float> totals(t.rows);
                for (uint64_t r = 0; r < t.rows; ++r) {
                    double sum = 0;
                    for (uint64_t e = t.offsets[r]; e < t.offsets[r + 1]; ++e) {
                        sum += testing::entry_value(t, e);
                        if (t.indices[e] < c0) continue;
                        tb.indices.push_back(t.indices[e] - c0);
                        if (valued) tb.values.push_back(t.values[e]);
                    }
                    tb.offsets.push_back(tb.indices.size());
                    totals[r] = float(sum);
                }
                Dense<float> a = testing::random_dense<float>(rows, n, 2, seed + 2, -3, 3, kPad);
                cpu_.bias_activation_forward(act, nullptr, a.view());
                const Dense<float> ab_host = [&] {  // the band of a, padded
                    Dense<float> b(rows, n - c0, 2, kPad);
                    for (size_t r = 0; r < rows; ++r)
                        for (size_t c = c0; c < n; ++c) b.at(r, c - c0) = a.at(r, c);
                    return b;
                }();
                const Dense<float> d0 =
                    testing::random_dense<float>(rows, n - c0, 3, seed + 3, -1, 1, kPad);
                DevCsr target(dev(), tb, batch, c0);
                DeviceArray<float> totals_d = dev_array(dev(), totals, "row totals");
                target.view.row_totals = totals_d.data();
                target.host.row_totals = totals.data();
                DevMat ad(dev(), ab_host), dd(dev(), d0);
                DeviceArray<double> ld(dev(), 1, "loss");
                const double start = 0.5;
                ld.upload(&start, 1);
                dev().output_delta(loss, act, ad.cview(), target.view, 0.25f, dd.view(), ld.data());
                Dense<float> want = d0;
                double loss_cpu = start;
                cpu_.output_delta(loss, act, ab_host.cview(), target.host, 0.25f, want.view(),
                                  &loss_cpu);
                const std::string what = "n=" + std::to_string(n) + " " +
                                         testing::shape_name(shape) + (valued ? " valued" : "");
                ASSERT_TRUE(close_dense(want, dd.get(d0), 1e-5, 0.05)) << what;
                const double got = fetch(ld, 1)[0];
                ASSERT_TRUE(close_scalar(loss_cpu, got, 1e-5, 1e-6))
                    << what << " loss cpu " << loss_cpu << " device " << got;
            }
}

// ---- output_delta ----

struct DeltaCombo {
    Activation act;
    ErrorFunction loss;
    bool multinomial;
};

std::vector<DeltaCombo> delta_combos() {
    std::vector<DeltaCombo> v;
    for (int a = 0; a < kActivations; ++a)
        for (int l = 0; l < kLosses; ++l) v.push_back({Activation(a), ErrorFunction(l), false});
    v.push_back({Activation::kSoftMax, ErrorFunction::kCrossEntropy, true});
    return v;
}

TEST_F(CudaParity, OutputDeltaEveryLossAndActivation) {
    int cases = 0;
    for (const DeltaCombo& combo : delta_combos())
        for (size_t n : {5, 130, 1000})
            for (bool ignore_zero : {false, true})
                for (bool weighted : {false, true})
                    for (bool boosted : {false, true}) {
                        if (boosted && combo.act == Activation::kSoftMax) continue;
                        const uint64_t seed = uint64_t(++cases) * 29;
                        if (!sampled(uint64_t(cases))) continue;
                        const RowShape shape = testing::kAllShapes[cases % 4];
                        const bool valued = (cases / 4) % 2 == 1;
                        const size_t rows = n == 1000 ? 17 : 64;
                        const formulas::ActivationParams act = act_params(combo.act);
                        formulas::LossParams loss;
                        loss.kind = combo.loss;
                        loss.multinomial = combo.multinomial;
                        loss.ignore_zero = ignore_zero;
                        if (boosted) {
                            loss.boost_one = 1.5f;
                            loss.boost_zero = 0.5f;
                        }
                        Dense<float> a =
                            testing::random_dense<float>(rows, n, 2, seed, -3, 3, kPad);
                        cpu_.bias_activation_forward(act, nullptr, a.view());
                        const Dataset t =
                            testing::random_dataset(rows + 6, uint32_t(n), shape, valued, seed + 1);
                        const TestBatch batch = testing::make_batch(t.rows, rows, true, seed + 2);
                        std::vector<float> wts(t.rows);
                        std::mt19937_64 rng(seed);
                        for (float& w : wts) w = 0.5f + float(rng() % 100) / 40.0f;
                        const Dense<float> d0 =
                            testing::random_dense<float>(rows, n, 3, seed + 3, -1, 1, kPad);
                        const float scale = 1.0f / float(rows);

                        DevCsr target(dev(), t, batch, 0, weighted ? &wts : nullptr);
                        DevMat ad(dev(), a), dd(dev(), d0);
                        DeviceArray<double> ld(dev(), 1, "loss");
                        const double start = 1.5;
                        ld.upload(&start, 1);
                        dev().output_delta(loss, act, ad.cview(), target.view, scale, dd.view(),
                                           ld.data());
                        Dense<float> want = d0;
                        double loss_cpu = start;
                        cpu_.output_delta(loss, act, a.cview(), target.host, scale, want.view(),
                                          &loss_cpu);
                        const std::string what =
                            std::string(to_string(combo.act)) + "/" + to_string(combo.loss) +
                            (combo.multinomial ? " multinomial" : "") + " n=" + std::to_string(n) +
                            (ignore_zero ? " ignore-zero" : "") + (weighted ? " weighted" : "") +
                            (boosted ? " boosted" : "") + " " + testing::shape_name(shape);
                        ASSERT_TRUE(close_dense(want, dd.get(d0), 1e-5, 0.05)) << what;
                        const double got = fetch(ld, 1)[0];
                        ASSERT_TRUE(close_scalar(loss_cpu, got, 1e-5, 1e-6))
                            << what << " loss cpu " << loss_cpu << " device " << got;
                        // No loss requested: the delta alone, and nothing else is written.
                        DevMat dd2(dev(), d0);
                        dev().output_delta(loss, act, ad.cview(), target.view, scale, dd2.view(),
                                           nullptr);
                        ASSERT_TRUE(close_dense(want, dd2.get(d0), 1e-5, 0.05)) << what;
                    }
}

TEST_F(CudaParity, OutputDeltaLossIsDeterministic) {
    const size_t rows = 512, n = 3000;
    const formulas::ActivationParams act = act_params(Activation::kSigmoid);
    formulas::LossParams loss;
    loss.kind = ErrorFunction::kCrossEntropy;
    Dense<float> a = testing::random_dense<float>(rows, n, 0, 5, -3, 3);
    cpu_.bias_activation_forward(act, nullptr, a.view());
    const Dataset t = testing::random_dataset(rows, uint32_t(n), RowShape::kPowerLaw, false, 6);
    const TestBatch batch = testing::make_batch(t.rows, rows, true, 7);
    DevCsr target(dev(), t, batch);
    DevMat ad(dev(), a), dd(dev(), a);
    DeviceArray<double> ld(dev(), 1, "loss");
    double first = 0;
    for (int run = 0; run < 3; ++run) {
        const double zero = 0;
        ld.upload(&zero, 1);
        dev().output_delta(loss, act, ad.cview(), target.view, 0.5f, dd.view(), ld.data());
        const double got = fetch(ld, 1)[0];
        if (run == 0) first = got;
        ASSERT_EQ(std::memcmp(&first, &got, sizeof(double)), 0) << "run " << run;
    }
}

}  // namespace
}  // namespace sparsenet::parity
