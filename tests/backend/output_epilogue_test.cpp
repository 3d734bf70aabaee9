// output_epilogue (issue 33): the output layer of a training step in one pass per row, against
// the two ops it replaces (bias_activation_forward, then output_delta on the new activations).
// Same formulas in the same order: the activations, the delta and the loss agree bit for bit on
// the CPU (and with the delta written over the activations), and on a device its fused kernel
// agrees with its own two kernels bit for bit and with the CPU within the harness's tolerances
// (parity tests: skipped without a GPU).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/loss.h"

namespace sparsenet::parity {
namespace {

struct EpilogueCombo {
    Activation act;
    ErrorFunction loss;
    bool multinomial;
};

std::vector<EpilogueCombo> epilogue_combos() {
    std::vector<EpilogueCombo> v;
    for (int a = 0; a < kActivations; ++a)
        for (int l = 0; l < kLosses; ++l) v.push_back({Activation(a), ErrorFunction(l), false});
    v.push_back({Activation::kSoftMax, ErrorFunction::kCrossEntropy, true});
    return v;
}

struct EpilogueCase {
    EpilogueCombo combo;
    size_t rows = 9, n = 130, pad = 3;
    bool ignore_zero = false, weighted = false, boosted = false, with_bias = true;
    RowShape shape = RowShape::kUniform;
    bool valued = false;
    uint64_t seed = 1;

    std::string name() const {
        return std::string(to_string(combo.act)) + "/" + to_string(combo.loss) +
               (combo.multinomial ? " multinomial" : "") + " n=" + std::to_string(n) +
               (ignore_zero ? " ignore-zero" : "") + (weighted ? " weighted" : "") +
               (boosted ? " boosted" : "") + (with_bias ? "" : " no-bias") + " " +
               testing::shape_name(shape);
    }
    formulas::LossParams loss() const {
        formulas::LossParams p;
        p.kind = combo.loss;
        p.multinomial = combo.multinomial;
        p.ignore_zero = ignore_zero;
        p.one_target = 0.8f;
        p.zero_target = 0.2f;
        p.one_scale = 1.5f;
        p.zero_scale = 0.75f;
        if (boosted) {
            p.boost_one = 1.5f;
            p.boost_zero = 0.5f;
        }
        return p;
    }
};

// The inputs of one case: pre-activations (padded ld), a bias, targets, example weights.
struct EpilogueInputs {
    Dense<float> z, delta0;
    std::vector<float> bias, weights;
    Dataset targets;
    TestBatch batch;
    explicit EpilogueInputs(const EpilogueCase& c) {
        z = testing::random_dense<float>(c.rows, c.n, c.pad, c.seed, -3, 3, kPad);
        delta0 = testing::random_dense<float>(c.rows, c.n, c.pad, c.seed + 1, -1, 1, kPad);
        std::mt19937_64 rng(c.seed + 2);
        bias.resize(c.n);
        for (float& b : bias) b = float(int(rng() % 200) - 100) / 50.0f;
        targets = testing::random_dataset(c.rows + 4, uint32_t(c.n), c.shape, c.valued, c.seed + 3);
        batch = testing::make_batch(targets.rows, c.rows, true, c.seed + 4);
        weights.resize(targets.rows);
        for (float& w : weights) w = 0.5f + float(rng() % 100) / 40.0f;
    }
};

bool same_bits(const Dense<float>& a, const Dense<float>& b) {
    return a.data.size() == b.data.size() &&
           std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
}

std::vector<EpilogueCase> grid() {
    std::vector<EpilogueCase> cases;
    uint64_t k = 0;
    for (const EpilogueCombo& combo : epilogue_combos())
        for (size_t n : {5, 130})
            for (bool ignore_zero : {false, true}) {
                ++k;
                EpilogueCase c;
                c.combo = combo;
                c.n = n;
                c.ignore_zero = ignore_zero;
                c.weighted = k % 2 == 0;
                c.boosted = combo.act != Activation::kSoftMax && k % 3 == 0;
                c.with_bias = k % 5 != 0;
                c.shape = testing::kAllShapes[k % 4];
                c.valued = (k / 4) % 2 == 1;
                c.seed = k * 31;
                cases.push_back(c);
            }
    return cases;
}

// One backend: the fused op against its two ops in sequence.
void expect_fused_equals_unfused(Backend& be, const EpilogueCase& c) {
    const EpilogueInputs in(c);
    DevCsr target(be, in.targets, in.batch, 0, c.weighted ? &in.weights : nullptr);
    const CsrBatchView tv = target.view;  // backend memory (host memory on the CPU)
    DeviceArray<float> bias = dev_array(be, in.bias, "test bias");
    const float* b = c.with_bias ? bias.data() : nullptr;
    const formulas::ActivationParams act = act_params(c.combo.act);
    const formulas::LossParams loss = c.loss();
    const float scale = 1.0f / float(c.rows);

    DevMat z1(be, in.z), d1(be, in.delta0), z2(be, in.z), d2(be, in.delta0);
    DeviceArray<double> l1(be, 1, "loss"), l2(be, 1, "loss");
    const double start = 0.75;
    l1.upload(&start, 1);
    l2.upload(&start, 1);
    be.bias_activation_forward(act, b, z1.view());
    be.output_delta(loss, act, z1.cview(), tv, scale, d1.view(), l1.data());
    be.output_epilogue(loss, act, b, z2.view(), tv, scale, d2.view(), l2.data());
    EXPECT_TRUE(same_bits(z1.get(in.z), z2.get(in.z))) << c.name() << ": activations";
    EXPECT_TRUE(same_bits(d1.get(in.delta0), d2.get(in.delta0))) << c.name() << ": delta";
    const double want = fetch(l1, 1)[0], got = fetch(l2, 1)[0];
    EXPECT_EQ(std::memcmp(&want, &got, sizeof(double)), 0)
        << c.name() << ": loss " << want << " vs " << got;
    // Without a loss: the same activations and delta, nothing else written.
    DevMat z3(be, in.z), d3(be, in.delta0);
    be.output_epilogue(loss, act, b, z3.view(), tv, scale, d3.view(), nullptr);
    EXPECT_TRUE(same_bits(z1.get(in.z), z3.get(in.z))) << c.name() << ": activations, no loss";
    EXPECT_TRUE(same_bits(d1.get(in.delta0), d3.get(in.delta0))) << c.name() << ": delta, no loss";
}

TEST(OutputEpilogue, EqualsActivationThenDeltaBitForBit) {
    for (int threads : {1, 2}) {
        CpuBackend cpu(threads);
        for (const EpilogueCase& c : grid()) expect_fused_equals_unfused(cpu, c);
    }
}

// The delta written over the activations (Network::Impl::delta_over_activation): output_delta
// with delta = a and output_epilogue with delta = z give, over [0, n), the delta of the two
// buffers bit for bit, and the same loss (each element's activation and the row's statistics are
// read before the element's delta is written).
bool same_columns(const Dense<float>& a, const Dense<float>& b) {
    for (size_t r = 0; r < a.rows; ++r)
        if (std::memcmp(&a.at(r, 0), &b.at(r, 0), a.cols * sizeof(float)) != 0) return false;
    return true;
}

void expect_in_place_equals_two_buffers(Backend& be, const EpilogueCase& c) {
    const EpilogueInputs in(c);
    DevCsr target(be, in.targets, in.batch, 0, c.weighted ? &in.weights : nullptr);
    const CsrBatchView tv = target.view;
    DeviceArray<float> bias = dev_array(be, in.bias, "test bias");
    const float* b = c.with_bias ? bias.data() : nullptr;
    const formulas::ActivationParams act = act_params(c.combo.act);
    const formulas::LossParams loss = c.loss();
    const float scale = 1.0f / float(c.rows);
    const double start = 0.25;
    // output_epilogue: z and delta apart, then delta = z.
    DevMat z1(be, in.z), d1(be, in.delta0), z2(be, in.z);
    DeviceArray<double> l1(be, 1, "loss"), l2(be, 1, "loss");
    l1.upload(&start, 1);
    l2.upload(&start, 1);
    be.output_epilogue(loss, act, b, z1.view(), tv, scale, d1.view(), l1.data());
    be.output_epilogue(loss, act, b, z2.view(), tv, scale, z2.view(), l2.data());
    const Dense<float> want = d1.get(in.delta0);
    EXPECT_TRUE(same_columns(want, z2.get(in.z))) << c.name() << ": epilogue in place";
    double w = fetch(l1, 1)[0], g = fetch(l2, 1)[0];
    EXPECT_EQ(std::memcmp(&w, &g, sizeof(double)), 0) << c.name() << ": loss " << w << " vs " << g;
    // output_delta on the activations z1 now holds: into d3, then over them.
    DevMat a(be, z1.get(in.z)), d3(be, in.delta0);
    l1.upload(&start, 1);
    l2.upload(&start, 1);
    be.output_delta(loss, act, z1.cview(), tv, scale, d3.view(), l1.data());
    be.output_delta(loss, act, a.cview(), tv, scale, a.view(), l2.data());
    EXPECT_TRUE(same_columns(d3.get(in.delta0), a.get(in.z))) << c.name() << ": delta in place";
    EXPECT_TRUE(same_columns(d3.get(in.delta0), want)) << c.name() << ": delta of the epilogue";
    w = fetch(l1, 1)[0];
    g = fetch(l2, 1)[0];
    EXPECT_EQ(std::memcmp(&w, &g, sizeof(double)), 0) << c.name() << ": loss " << w << " vs " << g;
}

TEST(OutputEpilogue, DeltaOverTheActivationsEqualsTwoBuffersBitForBit) {
    for (int threads : {1, 2}) {
        CpuBackend cpu(threads);
        for (const EpilogueCase& c : grid()) expect_in_place_equals_two_buffers(cpu, c);
    }
}

TEST(OutputEpilogue, RepeatedTargetColumnIsRefusedBeforeAnythingIsWritten) {
    EpilogueCase c;
    c.combo = {Activation::kSigmoid, ErrorFunction::kCrossEntropy, false};
    c.rows = 2;
    c.n = 6;
    EpilogueInputs in(c);
    in.targets.rows = 2;
    in.targets.offsets = {0, 2, 3};
    in.targets.indices = {3, 3, 1};  // row 0 holds column 3 twice
    in.targets.values.clear();
    in.batch = testing::make_batch(2, 2, false, 1);
    CpuBackend cpu(2);
    Dense<float> z = in.z, d = in.delta0;
    try {
        cpu.output_epilogue(c.loss(), act_params(c.combo.act), in.bias.data(), z.view(),
                            testing::csr_view(in.targets, in.batch), 0.5f, d.view(), nullptr);
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInternal);
        EXPECT_NE(std::string(e.what()).find("column 3"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(same_bits(z, in.z));
    EXPECT_TRUE(same_bits(d, in.delta0));
}

// row_norms (the finite-value guard's check of the activations): each row's sqrt(sum of a^2) of
// the activations, from output_delta (into a delta apart or over a) and from output_epilogue (of
// f(z + bias), delta over z too), with every other output bit for bit the same as without it; a
// NaN activation makes its row's norm NaN, an infinite one +inf.
void expect_row_norms(Backend& be, const EpilogueCase& c) {
    const EpilogueInputs in(c);
    DevCsr target(be, in.targets, in.batch, 0, c.weighted ? &in.weights : nullptr);
    const CsrBatchView tv = target.view;
    DeviceArray<float> bias = dev_array(be, in.bias, "test bias");
    const float* b = c.with_bias ? bias.data() : nullptr;
    const formulas::ActivationParams act = act_params(c.combo.act);
    const formulas::LossParams loss = c.loss();
    const float scale = 1.0f / float(c.rows);
    DevMat activated(be, in.z);
    be.bias_activation_forward(act, b, activated.view());
    Dense<float> a = activated.get(in.z);
    const size_t poisoned = c.rows > 2 ? 1 : 0, infinite = c.rows > 2 ? 2 : 0;
    if (c.rows > 2) {
        a.at(poisoned, c.n - 1) = kNaN;
        a.at(infinite, 0) = -kInf;
    }
    std::vector<double> want(c.rows);
    for (size_t r = 0; r < c.rows; ++r) {
        double sq = 0.0;
        for (size_t j = 0; j < c.n; ++j) sq += double(a.at(r, j)) * double(a.at(r, j));
        want[r] = std::sqrt(sq);
    }
    const auto check = [&](const DeviceArray<float>& norms, const char* what) {
        const std::vector<float> got = fetch(norms, c.rows);
        for (size_t r = 0; r < c.rows; ++r) {
            if (std::isnan(want[r])) {
                EXPECT_TRUE(std::isnan(got[r])) << c.name() << " " << what << " row " << r;
            } else if (std::isinf(want[r])) {
                EXPECT_EQ(got[r], kInf) << c.name() << " " << what << " row " << r;
            } else {
                EXPECT_NEAR(got[r], want[r], 1e-6 * want[r] + 1e-30)
                    << c.name() << " " << what << " row " << r;
            }
        }
    };
    DeviceArray<float> norms(be, c.rows, "row norms");
    // output_delta into a delta apart, with and without the norms: the same delta.
    DevMat a1(be, a), d1(be, in.delta0), d2(be, in.delta0);
    be.output_delta(loss, act, a1.cview(), tv, scale, d1.view(), nullptr, norms.data());
    check(norms, "output_delta");
    be.output_delta(loss, act, a1.cview(), tv, scale, d2.view(), nullptr);
    EXPECT_TRUE(same_bits(d1.get(in.delta0), d2.get(in.delta0))) << c.name();
    // Over the activations: the norms are the activations', not the delta's.
    DevMat a2(be, a);
    be.fill(norms.data(), c.rows, 0.0f);
    be.output_delta(loss, act, a2.cview(), tv, scale, a2.view(), nullptr, norms.data());
    check(norms, "output_delta over the activations");
    if (c.rows > 2) return;  // the epilogue activates z itself: no planted values
    DevMat z(be, in.z), z2(be, in.z), dz(be, in.delta0);
    be.fill(norms.data(), c.rows, 0.0f);
    be.output_epilogue(loss, act, b, z.view(), tv, scale, z.view(), nullptr, norms.data());
    check(norms, "output_epilogue over z");
    be.output_epilogue(loss, act, b, z2.view(), tv, scale, z2.view(), nullptr);
    EXPECT_TRUE(same_bits(z.get(in.z), z2.get(in.z))) << c.name();
}

TEST(OutputEpilogue, RowNormsAreTheActivationsNorms) {
    for (int threads : {1, 2}) {
        CpuBackend cpu(threads);
        for (EpilogueCase c : grid()) {
            expect_row_norms(cpu, c);
            c.rows = 2;  // the epilogue's norms (no planted values)
            expect_row_norms(cpu, c);
        }
    }
}

// ---- on the device (skipped without a GPU) ----

TEST_F(CudaParity, OutputEpilogueEqualsItsTwoKernelsBitForBit) {
    uint64_t k = 0;
    for (const EpilogueCase& c : grid()) {
        if (!sampled(++k)) continue;
        expect_fused_equals_unfused(dev(), c);
    }
}

TEST_F(CudaParity, DeltaOverTheActivationsEqualsTwoBuffersBitForBit) {
    uint64_t k = 0;
    for (EpilogueCase c : grid()) {
        if (!sampled(++k)) continue;
        c.n = c.n == 5 ? 5 : 9000;  // rows over several of the kernel's segments
        expect_in_place_equals_two_buffers(dev(), c);
    }
}

TEST_F(CudaParity, RowNormsAreTheActivationsNorms) {
    uint64_t k = 0;
    for (EpilogueCase c : grid()) {
        if (!sampled(++k)) continue;
        c.n = c.n == 5 ? 5 : 9000;  // rows over several of the kernel's segments
        expect_row_norms(dev(), c);
        c.rows = 2;
        expect_row_norms(dev(), c);
    }
}

TEST_F(CudaParity, OutputEpilogueMatchesTheCpu) {
    uint64_t k = 0;
    for (EpilogueCase c : grid()) {
        if (!sampled(++k)) continue;
        c.rows = c.n == 5 ? 64 : 17;
        c.n = c.n == 5 ? 5 : 1000;
        const EpilogueInputs in(c);
        const formulas::ActivationParams act = act_params(c.combo.act);
        const formulas::LossParams loss = c.loss();
        const float scale = 1.0f / float(c.rows);
        const std::vector<float>* w = c.weighted ? &in.weights : nullptr;
        DevCsr target(dev(), in.targets, in.batch, 0, w);
        DeviceArray<float> bias = dev_array(dev(), in.bias, "test bias");
        DevMat zd(dev(), in.z), dd(dev(), in.delta0);
        DeviceArray<double> ld(dev(), 1, "loss");
        const double start = 1.5;
        ld.upload(&start, 1);
        dev().output_epilogue(loss, act, c.with_bias ? bias.data() : nullptr, zd.view(),
                              target.view, scale, dd.view(), ld.data());
        Dense<float> z = in.z, d = in.delta0;
        double loss_cpu = start;
        cpu_.output_epilogue(loss, act, c.with_bias ? in.bias.data() : nullptr, z.view(),
                             target.host, scale, d.view(), &loss_cpu);
        ASSERT_TRUE(close_dense(z, zd.get(in.z), 1e-5, 0.05)) << c.name() << ": activations";
        ASSERT_TRUE(close_dense(d, dd.get(in.delta0), 1e-5, 0.05)) << c.name() << ": delta";
        const double got = fetch(ld, 1)[0];
        ASSERT_TRUE(close_scalar(loss_cpu, got, 1e-5, 1e-6))
            << c.name() << " loss cpu " << loss_cpu << " device " << got;
    }
}

}  // namespace
}  // namespace sparsenet::parity
