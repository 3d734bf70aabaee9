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
#include <cstring>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

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

}  // namespace
}  // namespace sparsenet
