// Training and scoring under --precision bf16 on the CPU backend (an exact emulation of BF16
// GEMM operands with FP32 sums, backend.h): the run converges about as the FP32 run does, the
// weights stay FP32 (master copies), and the precision is chosen in the documented order
// (NetworkOptions, then the config's Training Precision, then the device's default).
//
// A finite-difference gradient check is not meaningful in bf16: the forward pass rounds the
// weights to 8 significant bits, so it is piecewise constant in each weight at the steps a
// finite difference takes (below a BF16 ulp) and jumps by an ulp elsewhere. The backward pass is
// the FP32 one with BF16 operands (tests/gradient/ checks it in FP32): here the bf16 gradient is
// compared with the FP32 one instead.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "engine/network_impl.h"
#include "formulas/precision.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/recommender.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::ScopedEnv;

GeneratedData planted() {
    GenerateOptions g;
    g.users = 1200;
    g.items = 400;
    g.nnz = 30000;
    g.factors = 10;
    g.seed = 3;
    g.holdout = 0.2;
    return generate(g);
}

struct Fixture {
    NetworkConfig config = NetworkConfig::from_json(testing::sparse_autoencoder_json());
    Dataset in, out;
    explicit Fixture(const Dataset& train) : in(train), out(train) {
        in.name = "in";
        out.name = "out";
    }
    std::map<std::string, const Dataset*> data() const { return {{"in", &in}, {"out", &out}}; }
    std::map<std::string, uint32_t> widths() const { return {{"in", in.cols}, {"out", out.cols}}; }
};

TrainOptions adam(uint32_t epochs) {
    TrainOptions t;
    t.epochs = epochs;
    t.batch = 64;
    t.seed = 5;
    t.optimizer.kind = OptimizerKind::kAdam;
    t.optimizer.learning_rate = 0.003f;
    return t;
}

struct TrainedRun {
    std::vector<EpochStats> epochs;
    RankingMetrics metrics;
    std::vector<float> output_weights;
};

TrainedRun train(const Fixture& f, const GeneratedData& data, Precision p) {
    NetworkOptions no;
    no.device = "cpu";
    no.precision = p;
    Network net = Network::create(f.config, f.widths(), no);
    EXPECT_EQ(net.precision(), p);
    Trainer trainer(net, f.data(), adam(8));
    TrainedRun r;
    r.epochs = trainer.fit();
    Predictor predictor(net, {{"in", &f.in}});
    PredictOptions po;
    po.k = 20;
    r.metrics = ranking_metrics(predictor.top_k(po, &f.in), data.heldout, 20);
    for (const Parameter& prm : net.parameters()) {
        if (prm.name.rfind("weight:", 0) == 0 && prm.rows < 400)  // the hidden -> output GEMM's
            r.output_weights = net.get_parameter(prm.name);
    }
    return r;
}

TEST(Bf16Training, ConvergesLikeFp32AndKeepsFp32Weights) {
    const GeneratedData data = planted();
    const Fixture f(data.train);
    const TrainedRun fp32 = train(f, data, Precision::kFp32);
    const TrainedRun bf16 = train(f, data, Precision::kBf16);
    ASSERT_EQ(bf16.epochs.size(), 8u);
    EXPECT_LT(bf16.epochs.back().loss, 0.9 * bf16.epochs.front().loss);
    const RankingMetrics popular = ranking_metrics(popularity_top_k(f.in, 20), data.heldout, 20);
    std::printf("Recall@20 fp32 %.4f bf16 %.4f popularity %.4f; last loss fp32 %.6g bf16 %.6g\n",
                fp32.metrics.recall, bf16.metrics.recall, popular.recall, fp32.epochs.back().loss,
                bf16.epochs.back().loss);
    EXPECT_GT(bf16.metrics.recall, 1.5 * popular.recall);
    // The same seed: bf16 moves the losses (the mode is in effect) by little.
    EXPECT_NE(bf16.epochs.back().loss, fp32.epochs.back().loss);
    EXPECT_NEAR(bf16.epochs.back().loss, fp32.epochs.back().loss, 0.02 * fp32.epochs.back().loss);
    EXPECT_NEAR(bf16.metrics.recall, fp32.metrics.recall, 0.02);
    // Master weights stay FP32: most are not BF16 values (low 16 bits nonzero).
    ASSERT_FALSE(bf16.output_weights.empty());
    size_t fp32_only = 0;
    for (float w : bf16.output_weights) {
        uint32_t u;
        std::memcpy(&u, &w, sizeof u);
        if ((u & 0xffffu) != 0) ++fp32_only;
    }
    EXPECT_GT(fp32_only, bf16.output_weights.size() / 2);
}

TEST(Bf16Training, OptionsThenConfigThenTheDevicesDefault) {
    const GeneratedData data = planted();
    Fixture f(data.train);
    NetworkOptions no;
    no.device = "cpu";
    EXPECT_EQ(Network::create(f.config, f.widths(), no).precision(), Precision::kFp32);
    f.config.training = TrainingConfig{};
    f.config.training->precision = Precision::kBf16;
    Network from_config = Network::create(f.config, f.widths(), no);
    EXPECT_EQ(from_config.precision(), Precision::kBf16);
    no.precision = Precision::kTf32;
    EXPECT_EQ(Network::create(f.config, f.widths(), no).precision(), Precision::kTf32);

    // A model file keeps the key (weights in FP32); load follows it unless told otherwise.
    testing::TempDir dir;
    const std::string path = dir.file("m.nc");
    from_config.save(path);
    NetworkOptions plain;
    plain.device = "cpu";
    EXPECT_EQ(Network::load(path, plain).precision(), Precision::kBf16);
    plain.precision = Precision::kFp32;
    EXPECT_EQ(Network::load(path, plain).precision(), Precision::kFp32);
}

// Input -> H1 -> H2, Output <- {H1, H2}: four dense GEMM edges forward and back. The bf16
// gradient differs from the FP32 one only through operand rounding: each operand's relative
// error is at most 2^-9, so each product's at most about 2^-8 = 0.4 %, compounded over the three
// GEMM layers of the forward pass and the two of the backward pass before a weight gradient:
// within 2 % (about five times 2^-8) of the parameter's largest |gradient|.
TEST(Bf16Training, GradientsAreTheFp32OnesWithinTheRoundingOfTheOperands) {
    const NetworkConfig config = NetworkConfig::from_json(R"({"Name": "g",
        "ErrorFunction": "CrossEntropy", "Layers": [
        {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
        {"Name": "H1", "Kind": "Hidden", "N": 24, "Activation": "Tanh",
         "WeightInit": {"Scheme": "Gaussian", "Scale": 0.6, "Bias": 0.1}},
        {"Name": "H2", "Kind": "Hidden", "N": 16, "Source": "H1", "Activation": "Tanh",
         "WeightInit": {"Scheme": "Uniform", "Scale": 0.7}},
        {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Source": ["H1", "H2"],
         "Activation": "SoftMax", "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5}}]})");
    const Dataset x = testing::random_dataset(40, 30, testing::RowShape::kUniform, true, 21, "x");
    const Dataset y = testing::random_dataset(40, 20, testing::RowShape::kUniform, false, 22, "y");
    NetworkOptions no;
    no.device = "cpu";
    no.seed = 4;
    Network net = Network::create(config, {{"x", 30}, {"y", 20}}, no);
    TrainOptions to;
    to.batch = 40;
    Trainer trainer(net, {{"x", &x}, {"y", &y}}, to);
    const auto fp32 = trainer.compute_gradients(0, 40);
    net.set_precision(Precision::kBf16);
    const auto bf16 = trainer.compute_gradients(0, 40);
    ASSERT_EQ(fp32.size(), bf16.size());
    size_t differ = 0, total = 0;
    double worst = 0.0;
    for (const auto& [name, g] : fp32) {
        const std::vector<float>& b = bf16.at(name);
        ASSERT_EQ(b.size(), g.size()) << name;
        double scale = 0.0;
        for (float v : g) scale = std::max(scale, double(std::fabs(v)));
        ASSERT_GT(scale, 0.0) << name;
        for (size_t i = 0; i < g.size(); ++i) {
            EXPECT_NEAR(b[i], g[i], 0.02 * scale) << name << "[" << i << "]";
            worst = std::max(worst, std::fabs(double(b[i]) - g[i]) / scale);
            differ += b[i] != g[i];
            ++total;
        }
    }
    std::printf("largest |bf16 - fp32| gradient difference: %.2e of the parameter's largest\n",
                worst);
    EXPECT_GT(differ, total / 2);  // the rounding reaches the gradients
}

// ---- the BF16 copies of the weights (issue 46) ----
// Under bf16 each weight matrix that a GEMM reads keeps a BF16 copy, written where its FP32
// master is updated (in the optimizer's pass, or one pass after a step inside the weight-gradient
// GEMM, a sparse step or WeightNorm), and every GEMM reads the copy. The master changes once per
// step, so rounding it once per step gives the values that rounding it at every GEMM gave: the
// reference is the run without copies (StepSwitches::bf16_weight_copies off), whose GEMMs round the
// FP32 masters themselves.

// Input -> H1 -> H2, Output <- {H1, H2}; wn: WeightNorm on H2 (its step is followed by a pass
// that changes the weights); tied: an autoencoder whose output uses the input matrix transposed
// (one matrix read by csr_matmul and by a GEMM).
NetworkConfig copy_config(bool wn, bool tied) {
    if (tied) {
        return NetworkConfig::from_json(R"({"Name": "t", "ErrorFunction": "CrossEntropy",
            "Layers": [
            {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
            {"Name": "H", "Kind": "Hidden", "N": 24, "Activation": "Tanh", "WeightNorm": 0.9,
             "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5}},
            {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "x",
             "Activation": "Sigmoid",
             "SharedWeights": {"InputLayer": "H", "SourceInputLayer": "In",
                               "SourceOutputLayer": "H", "Transposed": true}}]})");
    }
    return NetworkConfig::from_json(std::string(R"({"Name": "g",
        "ErrorFunction": "CrossEntropy", "Layers": [
        {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
        {"Name": "H1", "Kind": "Hidden", "N": 40, "Activation": "Tanh",
         "WeightInit": {"Scheme": "Gaussian", "Scale": 0.6, "Bias": 0.1}},
        {"Name": "H2", "Kind": "Hidden", "N": 24, "Source": "H1", "Activation": "Tanh",)") +
                                    (wn ? R"("WeightNorm": 0.7,)" : "") + R"(
         "WeightInit": {"Scheme": "Uniform", "Scale": 0.7}},
        {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Source": ["H1", "H2"],
         "Activation": "SoftMax", "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5}}]})");
}

struct CopyRun {
    std::vector<double> losses;
    std::vector<std::vector<float>> params;
};

CopyRun train_bf16(const NetworkConfig& config, OptimizerKind kind, Precision p = Precision::kBf16,
                   bool weight_copies = true) {
    const Dataset x = testing::random_dataset(96, 30, testing::RowShape::kPowerLaw, true, 21, "x");
    const Dataset y = testing::random_dataset(96, 20, testing::RowShape::kUniform, false, 22, "y");
    NetworkOptions no;
    no.device = "cpu";
    no.seed = 4;
    no.precision = p;
    no.switches.bf16_weight_copies = weight_copies;
    const bool tied = config.name == "t";
    std::map<std::string, uint32_t> widths{{"x", 30}};
    std::map<std::string, const Dataset*> data{{"x", &x}};
    if (!tied) widths["y"] = 20, data["y"] = &y;
    Network net = Network::create(config, widths, no);
    TrainOptions to;
    to.epochs = 3;
    to.batch = 16;
    to.seed = 7;
    to.optimizer.kind = kind;
    to.optimizer.learning_rate = kind == OptimizerKind::kAdam ? 0.003f : 0.05f;
    to.optimizer.l2 = 0.001f;
    Trainer trainer(net, data, to);
    CopyRun r;
    for (const EpochStats& e : trainer.fit()) r.losses.push_back(e.loss);
    for (const Parameter& prm : net.parameters()) r.params.push_back(net.get_parameter(prm.name));
    return r;
}

TEST(Bf16WeightCopies, TrainingIsDeterministicAndEqualsRoundingTheWeightsOncePerStep) {
    struct Case {
        const char* what;
        bool wn, tied;
        OptimizerKind kind;
    };
    for (const Case c :
         {Case{"SGD, in the weight-gradient GEMM", false, false, OptimizerKind::kSgd},
          Case{"Momentum, in the GEMM", false, false, OptimizerKind::kMomentum},
          Case{"Adam, the optimizer's pass", false, false, OptimizerKind::kAdam},
          Case{"SGD with WeightNorm", true, false, OptimizerKind::kSgd},
          Case{"Adam with WeightNorm", true, false, OptimizerKind::kAdam},
          Case{"tied, transposed, WeightNorm", false, true, OptimizerKind::kAdam}}) {
        const NetworkConfig config = copy_config(c.wn, c.tied);
        const CopyRun copies = train_bf16(config, c.kind);
        const CopyRun again = train_bf16(config, c.kind);
        const CopyRun reference = train_bf16(config, c.kind, Precision::kBf16, false);
        const CopyRun fp32 = train_bf16(config, c.kind, Precision::kFp32);
        EXPECT_EQ(copies.losses, again.losses) << c.what;
        EXPECT_EQ(copies.params, again.params) << c.what;
        EXPECT_EQ(copies.losses, reference.losses) << c.what;
        EXPECT_EQ(copies.params, reference.params) << c.what;
        EXPECT_NE(copies.params, fp32.params) << c.what << ": bf16 is in effect";
    }
}

// Every GEMM that reads a weight matrix (forward: b = W; the input delta: b = W^T; both have
// trans_a false here) reads a copy, and the copy holds the rounding of the master at that moment;
// the weight-gradient GEMMs (trans_a) read activations and deltas, whose copies their producers
// write (tests/engine/bf16_producer_copies_training_test.cpp checks those).
struct GemmAudit {
    size_t weight_gemms = 0, copies_read = 0, stale = 0, gradient_gemms = 0, gradient_copies = 0;
};

void audit_gemm(const GemmCall& call, void* context) {
    GemmAudit& a = *static_cast<GemmAudit*>(context);
    if (call.backend->precision() != Precision::kBf16) return;
    if (call.trans_a) {
        ++a.gradient_gemms;
        a.gradient_copies += (call.a.bf16 != nullptr) + (call.b.bf16 != nullptr);
        return;
    }
    ++a.weight_gemms;
    if (call.b.bf16 == nullptr) return;
    ++a.copies_read;
    for (size_t r = 0; r < call.b.rows; ++r) {
        for (size_t j = 0; j < call.b.ld; ++j) {
            const uint16_t want =
                j < call.b.cols ? formulas::bf16_bits(call.b.data[r * call.b.ld + j]) : 0;
            if (call.b.bf16[r * call.b.ld + j] != want) {
                ++a.stale;
                return;
            }
        }
    }
}

TEST(Bf16WeightCopies, EveryGemmThatReadsWeightsReadsACurrentCopy) {
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
        GemmAudit audit;
        set_gemm_observer(audit_gemm, &audit);
        train_bf16(copy_config(true, false), kind);
        set_gemm_observer(nullptr, nullptr);
        EXPECT_GT(audit.weight_gemms, 100u);
        EXPECT_EQ(audit.copies_read, audit.weight_gemms) << to_string(kind);
        EXPECT_EQ(audit.stale, 0u) << to_string(kind);
        EXPECT_GT(audit.gradient_gemms, 0u);
        // Both operands from their producers' copies: H1's and H2's activations, H2's and
        // Out's deltas (bf16_producer_copies_training_test.cpp checks they are current).
        EXPECT_EQ(audit.gradient_copies, 2 * audit.gradient_gemms);
    }
    // FP32 keeps no copies.
    GemmAudit fp32;
    set_gemm_observer(audit_gemm, &fp32);
    train_bf16(copy_config(false, false), OptimizerKind::kSgd, Precision::kFp32);
    set_gemm_observer(nullptr, nullptr);
    EXPECT_EQ(fp32.weight_gemms, 0u);
}

// The memory plan counts the copies: 2 B per weight of each matrix a GEMM reads (not the sparse
// input's, which csr_matmul reads in FP32), with the FP32 masters.
TEST(Bf16WeightCopies, TheMemoryPlanCountsTheCopies) {
    const NetworkConfig config = copy_config(false, false);
    auto shape = [](const char* name, uint32_t cols, uint64_t nnz) {
        DatasetShape s;
        s.name = name;
        s.rows = s.examples = 96;
        s.cols = cols;
        s.nnz = nnz;
        return s;
    };
    const std::map<std::string, DatasetShape> shapes{{"x", shape("x", 30, 600)},
                                                     {"y", shape("y", 20, 500)}};
    OptimizerOptions sgd;
    const MemoryPlan fp32 = plan_memory(config, shapes, 1, 16, sgd, 0.0f);
    const MemoryPlan bf16 = plan_memory(config, shapes, 1, 16, sgd, 0.0f, false, Precision::kBf16);
    EXPECT_EQ(fp32.bf16_weights, 0.0);
    EXPECT_EQ(bf16.weights, fp32.weights);
    // H1 -> H2 (40 x 24, rows of 32 floats), H1 -> Out (40 x 20), H2 -> Out (24 x 20); rows
    // padded to 16 floats.
    EXPECT_EQ(bf16.bf16_weights, 2.0 * (40 * 32 + 40 * 32 + 24 * 32));
    // (and the activations' and deltas' copies: bf16_producer_copies_training_test.cpp)
    EXPECT_EQ(bf16.device_bytes(), fp32.device_bytes() + bf16.bf16_weights + bf16.bf16_activations);
    EXPECT_NE(describe_memory(bf16, false).find("BF16 weight copies"), std::string::npos);
    StepSwitches off;
    off.bf16_weight_copies = false;
    EXPECT_EQ(
        plan_memory(config, shapes, 1, 16, sgd, 0.0f, false, Precision::kBf16, off).bf16_weights,
        0.0);
}

// ---- predict and serve in bf16 with only the BF16 weights (issue 46 item 3) ----

template <class F>
void expect_usage_error(F&& f, const std::string& what) {
    try {
        f();
        ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage) << what << ": " << e.what();
    }
}

TEST(Bf16WeightsOnly, PredictsAndServesTheSameAndRefusesWhatNeedsTheFp32Weights) {
    const GeneratedData data = planted();
    const Fixture f(data.train);
    testing::TempDir dir;
    const std::string path = dir.file("bf16.nc");
    {
        NetworkOptions no;
        no.device = "cpu";
        no.precision = Precision::kBf16;
        Network net = Network::create(f.config, f.widths(), no);
        Trainer(net, f.data(), adam(1)).fit();
        net.save(path);
    }
    NetworkOptions no;
    no.device = "cpu";
    no.precision = Precision::kBf16;
    Network both = Network::load(path, no);
    Network only = Network::load(path, no);
    EXPECT_FALSE(only.only_bf16_weights());
    only.keep_only_bf16_weights();
    EXPECT_TRUE(only.only_bf16_weights());
    PredictOptions po;
    po.k = 20;
    const TopK want = Predictor(both, {{"in", &f.in}}).top_k(po, &f.in);
    const TopK got = Predictor(only, {{"in", &f.in}}).top_k(po, &f.in);
    EXPECT_EQ(got.indices, want.indices);
    EXPECT_EQ(got.scores, want.scores);

    // The sparse input's matrix (csr_matmul, FP32) is kept; the hidden -> output one is not.
    std::string input_weights, output_weights;
    for (const Parameter& prm : only.parameters()) {
        if (prm.name.rfind("weight:", 0) != 0) continue;
        (prm.rows == f.in.cols ? input_weights : output_weights) = prm.name;
    }
    ASSERT_FALSE(input_weights.empty());
    ASSERT_FALSE(output_weights.empty());
    EXPECT_EQ(only.get_parameter(input_weights), both.get_parameter(input_weights));
    expect_usage_error([&] { only.get_parameter(output_weights); }, "get_parameter");
    expect_usage_error([&] { only.save(dir.file("again.nc")); }, "save");
    expect_usage_error([&] { Trainer(only, f.data(), adam(1)); }, "training");
    expect_usage_error([&] { only.set_precision(Precision::kFp32); }, "set_precision");
    NetworkOptions fp32 = no;
    fp32.precision = Precision::kFp32;
    Network in_fp32 = Network::load(path, fp32);
    expect_usage_error([&] { in_fp32.keep_only_bf16_weights(); }, "keep_only_bf16_weights in fp32");

    // The Recommender: the same answers with only the BF16 weights.
    RecommenderOptions ro;
    ro.precision = Precision::kBf16;
    const Recommender full(path, ro);
    ro.bf16_weights_only = true;
    const Recommender half(path, ro);
    for (int user = 0; user < 20; ++user) {
        std::vector<ItemRef> items;
        for (uint64_t e = f.in.offsets[user]; e < f.in.offsets[user + 1]; ++e)
            items.emplace_back(f.in.indices[e]);
        const Recommendations a = full.recommend(items), b = half.recommend(items);
        ASSERT_EQ(a.items.size(), b.items.size());
        for (size_t i = 0; i < a.items.size(); ++i) {
            EXPECT_EQ(a.items[i].id, b.items[i].id);
            EXPECT_EQ(a.items[i].score, b.items[i].score);
        }
    }
    ro.fp16_screening = true;
    expect_usage_error([&] { Recommender screened(path, ro); }, "with fp16 screening");
    ro.fp16_screening = false;
    ro.precision = Precision::kFp32;
    expect_usage_error([&] { Recommender in_fp32_too(path, ro); }, "recommender in fp32");
}

// ---- the kernel of the BF16 GEMMs (src/backend/cpu/bf16_matmul.h) ----
// Twenty training steps with oneDNN's BF16 matmul track the emulated steps (the oracle): the same
// BF16 operands and FP32 sums in another order, so the weights drift apart by rounding only. For
// the optimizers whose step runs inside the weight-gradient GEMM (SGD, Momentum: alpha = -lr at
// run time) and one that updates in its own pass (Adam).
//
// How far rounding alone takes them: a sum that differs in its last FP32 bit can round to the
// other BF16 neighbour when it lies near a tie, which moves that operand by up to 2^-8 of itself,
// and later steps spread the change over every weight. The emulated steps themselves, built with
// the step's loops on 256-bit and on 512-bit vectors (sums in another order, nothing else),
// ended up to 1.4e-3 of a matrix's largest weight apart (root mean square 6e-4), and the two
// kernels 1.1e-3 apart in one build, 2e-7 in the other (2026-12-02). A wrong transpose, alpha
// or beta moves the weights by the size of the updates: oneDNN's alpha 10 % off gave 0.14 (SGD)
// and 0.26 (Momentum) of the largest weight.
struct KernelRun {
    std::vector<double> losses;
    std::vector<std::vector<float>> params;
    std::string implementation;
    size_t amx_calls = 0;
};

// outputs: the output layer's width; amx: whether the backend sends wide weight gradients to
// amx_gemm_tn (cpu/amx_gemm.h; at 8,300 outputs and batches of 32 the 40-unit layer's are).
KernelRun train_20_steps(OptimizerKind kind, cpu::Bf16Kernel kernel, size_t outputs = 20,
                         size_t batch = 16, bool amx = false) {
    const Dataset x =
        testing::random_dataset(20 * batch, 30, testing::RowShape::kPowerLaw, true, 21, "x");
    const Dataset y =
        testing::random_dataset(20 * batch, outputs, testing::RowShape::kUniform, false, 22, "y");
    NetworkOptions no;
    no.device = "cpu";
    no.threads = 2;
    no.seed = 4;
    no.precision = Precision::kBf16;
    Network net = Network::create(copy_config(false, false), {{"x", 30}, {"y", outputs}}, no);
    auto* cpu = dynamic_cast<CpuBackend*>(net.impl().backend.get());
    EXPECT_NE(cpu, nullptr);
    cpu->set_bf16_kernel(kernel);
    if (kernel == cpu::Bf16Kernel::kOnednn) cpu->set_amx_gemm(amx);
    TrainOptions to;
    to.epochs = 1;
    to.batch = uint32_t(batch);
    to.seed = 7;
    to.optimizer.kind = kind;
    to.optimizer.learning_rate = kind == OptimizerKind::kAdam ? 0.003f : 0.05f;
    Trainer trainer(net, {{"x", &x}, {"y", &y}}, to);
    KernelRun r;
    for (const EpochStats& e : trainer.fit()) r.losses.push_back(e.loss);
    for (const Parameter& prm : net.parameters()) r.params.push_back(net.get_parameter(prm.name));
    r.implementation = cpu->onednn_implementation();
    r.amx_calls = cpu->amx_gemm_calls();
    return r;
}

// The bound of the tests below: every weight and the root mean square over each matrix within
// BF16's own rounding (2^-8 = 3.9e-3 of a value; see above), the loss within 1e-4.
void expect_tracks(const KernelRun& run, const KernelRun& reference, const char* what) {
    ASSERT_EQ(run.losses.size(), 1u);
    EXPECT_NEAR(run.losses[0], reference.losses[0], 1e-4 * std::fabs(reference.losses[0]));
    ASSERT_EQ(run.params.size(), reference.params.size());
    double worst = 0.0, worst_rms = 0.0;
    for (size_t p = 0; p < run.params.size(); ++p) {
        double scale = 0.0, squares = 0.0;
        for (float v : reference.params[p]) scale = std::max(scale, double(std::fabs(v)));
        for (size_t i = 0; i < run.params[p].size(); ++i) {
            const double d = std::fabs(double(run.params[p][i]) - reference.params[p][i]) / scale;
            worst = std::max(worst, d);
            squares += d * d;
        }
        worst_rms = std::max(worst_rms, std::sqrt(squares / double(run.params[p].size())));
    }
    EXPECT_LT(worst, 4e-3);
    EXPECT_LT(worst_rms, 2e-3);
    std::printf(
        "%s: loss %.9g (reference %.9g), weight difference up to %.2e of the matrix's largest "
        "(root mean square %.2e), oneDNN %s\n",
        what, run.losses[0], reference.losses[0], worst, worst_rms, run.implementation.c_str());
}

TEST(Bf16Kernels, OnednnStepsTrackTheEmulatedStepsOverTwentySteps) {
    if (!cpu::onednn_bf16_available()) GTEST_SKIP() << cpu::bf16_choice().line;
    for (OptimizerKind kind :
         {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam}) {
        SCOPED_TRACE(to_string(kind));
        const KernelRun emulated = train_20_steps(kind, cpu::Bf16Kernel::kEmulation);
        const KernelRun onednn = train_20_steps(kind, cpu::Bf16Kernel::kOnednn);
        EXPECT_TRUE(emulated.implementation.empty());
        EXPECT_FALSE(onednn.implementation.empty()) << "oneDNN ran no matmul";
        expect_tracks(onednn, emulated, to_string(kind));
    }
}

// The output layer's weight gradient on AMX tiles (amx_gemm_tn: SGD's and Momentum's update
// inside it, with the BF16 copy for SGD; Adam's plain gradient) against the same steps on oneDNN's
// matmul. Both sum the products on AMX tiles in a similar order, so they stay far closer than
// either does to the emulation at this width: 8,300 SoftMax outputs, where the two oneDNN-fed
// runs drift from the emulated one by up to 8e-3 (SGD) and 8e-2 (Momentum) of a matrix's largest
// weight in 20 steps, one as far as the other (2026-12-02). A wrong alpha, beta or copy moves the
// weights by the size of the updates: alpha 10 % off in amx_gemm_tn's update gave 1.2 of the
// largest weight (SGD and Momentum).
TEST(Bf16Kernels, AmxWeightGradientStepsTrackTheOnednnSteps) {
    if (!cpu::onednn_bf16_available() || !cpu::amx_available())
        GTEST_SKIP() << "no AMX tiles: " << cpu::bf16_choice().line;
    for (OptimizerKind kind :
         {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam}) {
        SCOPED_TRACE(to_string(kind));
        const KernelRun onednn = train_20_steps(kind, cpu::Bf16Kernel::kOnednn, 8300, 32, false);
        const KernelRun tiles = train_20_steps(kind, cpu::Bf16Kernel::kOnednn, 8300, 32, true);
        EXPECT_EQ(onednn.amx_calls, 0u);
        EXPECT_EQ(tiles.amx_calls, 20u) << "one wide weight gradient a step";
        expect_tracks(tiles, onednn, to_string(kind));
    }
}

}  // namespace
}  // namespace sparsenet
