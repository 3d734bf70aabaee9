// Optimizers through the Trainer: the learning-rate Decay schedule against values worked out by
// hand on a one-weight network, train_options() from a config's Training section, every
// optimizer training an autoencoder, and exact against lazy sparse-input updates.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"

namespace sparsenet {
namespace {

NetworkOptions cpu_options(uint64_t seed = 3) {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = seed;
    return o;
}

// One example: input column 0 (boolean), target 2.0 at column 0. Output = w + b (Linear, L2),
// starting from w = 0.5, b = 0.25; dL/dz = w + b - 2 feeds both the weight and the bias.
std::string linear_config(const std::string& extra) {
    return R"({ "ErrorFunction": "L2", )" + extra + R"(
      "Layers": [
        { "Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true },
        { "Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Activation": "Linear",
          "WeightInit": { "Scheme": "Constant", "Scale": 0.5, "Bias": 0.25 } } ] })";
}

struct OneExample {
    Dataset x, y;
    OneExample() {
        x.name = "x";
        x.rows = 1;
        x.cols = 1;
        x.offsets = {0, 1};
        x.indices = {0};
        y = x;
        y.name = "y";
        y.values = {2.0f};
    }
    std::map<std::string, const Dataset*> data() const { return {{"x", &x}, {"y", &y}}; }
};

struct WeightAndBias {
    float w, b;
};

WeightAndBias train_linear(const std::string& config_extra, TrainOptions options) {
    OneExample d;
    Network net = Network::create(NetworkConfig::from_json(linear_config(config_extra)),
                                  {{"x", 1}, {"y", 1}}, cpu_options());
    Trainer trainer(net, d.data(), options);
    trainer.fit();
    return {net.get_parameter("weight:In->Out")[0], net.get_parameter("bias:Out")[0]};
}

TEST(Decay, SgdStepsFollowAlphaOverOnePlusDecayTimesSteps) {
    TrainOptions o;
    o.epochs = 3;
    o.batch = 1;
    o.optimizer.learning_rate = 0.1f;
    // Decay 0.5 from the config: alpha_t = 0.1 / (1 + 0.5 (t - 1)) = 0.1, 0.0666667, 0.05.
    const WeightAndBias got = train_linear(R"("Decay": 0.5,)", o);
    double w = 0.5, b = 0.25;
    for (int t = 1; t <= 3; ++t) {
        const double delta = w + b - 2.0;
        const double alpha_t = 0.1 / (1.0 + 0.5 * (t - 1));
        w -= alpha_t * delta;
        b -= alpha_t * delta;
    }
    EXPECT_NEAR(got.w, w, 1e-6);
    EXPECT_NEAR(got.b, b, 1e-6);
    // By hand: w = 0.5 + 0.125 + 0.0666667 * 1.0 + 0.05 * 0.8666667 = 0.735, b = 0.485.
    EXPECT_NEAR(got.w, 0.735, 1e-6);
    EXPECT_NEAR(got.b, 0.485, 1e-6);

    // TrainOptions::decay overrides the config's: 0 gives three steps of 0.1.
    o.decay = 0.0f;
    const WeightAndBias plain = train_linear(R"("Decay": 0.5,)", o);
    double wp = 0.5, bp = 0.25;
    for (int t = 1; t <= 3; ++t) {
        const double delta = wp + bp - 2.0;
        wp -= 0.1 * delta;
        bp -= 0.1 * delta;
    }
    EXPECT_NEAR(plain.w, wp, 1e-6);  // 0.5 + 0.125 + 0.1 + 0.08 = 0.805
    EXPECT_NEAR(plain.w, 0.805, 1e-6);
}

TEST(Decay, AppliesToAdaptiveOptimizersAndCountsAcrossEpochs) {
    // Momentum (mu 0.5), Decay 1: alpha_t = 0.2 / t; two epochs of two identical examples.
    OneExample d;
    d.x.rows = 2;
    d.x.offsets = {0, 1, 2};
    d.x.indices = {0, 0};
    d.y.rows = 2;
    d.y.offsets = {0, 1, 2};
    d.y.indices = {0, 0};
    d.y.values = {2.0f, 2.0f};
    Network net = Network::create(NetworkConfig::from_json(linear_config(R"("Decay": 1.0,)")),
                                  {{"x", 1}, {"y", 1}}, cpu_options());
    TrainOptions o;
    o.epochs = 2;
    o.batch = 1;
    o.optimizer.kind = OptimizerKind::kMomentum;
    o.optimizer.learning_rate = 0.2f;
    o.optimizer.mu = 0.5f;
    Trainer trainer(net, d.data(), o);
    trainer.fit();
    double w = 0.5, b = 0.25, vw = 0, vb = 0;
    for (int t = 1; t <= 4; ++t) {  // steps count on across the epoch boundary
        const double delta = w + b - 2.0;
        const double alpha_t = 0.2 / (1.0 + 1.0 * (t - 1));
        vw = 0.5 * vw - alpha_t * delta;
        vb = 0.5 * vb - alpha_t * delta;
        w += vw;
        b += vb;
    }
    EXPECT_NEAR(net.get_parameter("weight:In->Out")[0], w, 1e-6);
    EXPECT_NEAR(net.get_parameter("bias:Out")[0], b, 1e-6);
}

TEST(Decay, NegativeValuesAreRejected) {
    OneExample d;
    Network net = Network::create(NetworkConfig::from_json(linear_config("")), {{"x", 1}, {"y", 1}},
                                  cpu_options());
    TrainOptions o;
    o.decay = -0.1f;
    try {
        Trainer trainer(net, d.data(), o);
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find("decay"), std::string::npos) << e.what();
    }
}

TEST(TrainOptionsFromConfig, TrainingSectionAndDecayBecomeTheOptions) {
    const NetworkConfig config = NetworkConfig::from_json(linear_config(R"(
        "Decay": 0.25,
        "Training": { "Optimizer": "AdamW", "Alpha": 0.002, "Mu": 0.8, "Mu1": 0.99,
                      "Epsilon": 1e-7, "Lambda": 0.01, "Lambda1": 0.001, "Epochs": 7,
                      "BatchSize": 33, "Seed": 99, "SparseUpdates": "Lazy" },)"));
    const TrainOptions o = train_options(config);
    EXPECT_EQ(o.optimizer.kind, OptimizerKind::kAdamW);
    EXPECT_EQ(o.optimizer.learning_rate, 0.002f);
    EXPECT_EQ(o.optimizer.mu, 0.8f);
    EXPECT_EQ(o.optimizer.mu1, 0.99f);
    ASSERT_TRUE(o.optimizer.epsilon.has_value());
    EXPECT_EQ(*o.optimizer.epsilon, 1e-7f);
    EXPECT_EQ(o.optimizer.l2, 0.01f);
    EXPECT_EQ(o.optimizer.l1, 0.001f);
    EXPECT_EQ(o.optimizer.sparse_update, SparseUpdate::kLazy);
    EXPECT_EQ(o.epochs, 7u);
    EXPECT_EQ(o.batch, 33u);
    EXPECT_EQ(o.seed, 99u);
    ASSERT_TRUE(o.decay.has_value());
    EXPECT_EQ(*o.decay, 0.25f);

    // No section: the defaults, and the network's Decay (0).
    const TrainOptions d = train_options(NetworkConfig::from_json(linear_config("")));
    const TrainOptions defaults;
    EXPECT_EQ(d.optimizer, defaults.optimizer);
    EXPECT_EQ(d.epochs, 40u);
    EXPECT_EQ(d.batch, 1024u);
    EXPECT_EQ(d.seed, 12134u);
    EXPECT_EQ(d.decay.value_or(-1.0f), 0.0f);
    EXPECT_FALSE(d.optimizer.epsilon.has_value());
    EXPECT_EQ(d.optimizer.resolved_epsilon(), 0.0f);  // SGD uses none
}

// ---------------------------------------------------------------- every optimizer learns

const char* kAutoencoder = R"({
  "Name": "ae", "ErrorFunction": "ScaledMarginalCrossEntropy", "ShuffleIndices": true,
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 24, "Activation": "Tanh"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "Sigmoid",
     "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -2.0}}
  ]})";

Dataset planted(const std::string& name) {
    GenerateOptions g;
    g.users = 300;
    g.items = 80;
    g.nnz = 4000;
    g.seed = 5;
    Dataset d = generate(g).train;
    d.name = name;
    return d;
}

std::vector<std::vector<float>> all_parameters(const Network& net) {
    std::vector<std::vector<float>> values;
    for (const Parameter& p : net.parameters()) values.push_back(net.get_parameter(p.name));
    return values;
}

TEST(OptimizerTraining, EveryOptimizerLowersTheLoss) {
    const Dataset in = planted("in"), out = planted("out");
    const NetworkConfig config = NetworkConfig::from_json(kAutoencoder);
    struct Case {
        OptimizerKind kind;
        float alpha;
    };
    // Learning rates of the usual size for each rule (AdaDelta ignores alpha).
    for (Case c : std::vector<Case>{{OptimizerKind::kSgd, 0.5f},
                                    {OptimizerKind::kMomentum, 0.1f},
                                    {OptimizerKind::kNesterov, 0.1f},
                                    {OptimizerKind::kAdaGrad, 0.05f},
                                    {OptimizerKind::kRmsProp, 0.003f},
                                    {OptimizerKind::kAdaDelta, 1.0f},
                                    {OptimizerKind::kAdam, 0.005f},
                                    {OptimizerKind::kAdamW, 0.005f}}) {
        SCOPED_TRACE(to_string(c.kind));
        Network net = Network::create(config, {{"in", in.cols}, {"out", out.cols}}, cpu_options(8));
        TrainOptions o;
        o.epochs = 4;
        o.batch = 32;
        o.optimizer.kind = c.kind;
        o.optimizer.learning_rate = c.alpha;
        o.optimizer.l2 = c.kind == OptimizerKind::kAdamW ? 0.01f : 0.0f;
        // AdaDelta's steps start at sqrt(eps / E[g^2]) g: DSSTNE's 1e-9 floor makes them tiny,
        // Zeiler's 1e-6 lets a short run show progress.
        if (c.kind == OptimizerKind::kAdaDelta) o.optimizer.epsilon = 1e-6f;
        Trainer trainer(net, {{"in", &in}, {"out", &out}}, o);
        const double before = trainer.evaluate_loss();
        trainer.fit();
        const double after = trainer.evaluate_loss();
        EXPECT_LT(after, before * 0.9) << before << " -> " << after;
        EXPECT_TRUE(std::isfinite(after));
    }
}

// SGD without regularisation: lazy and exact sparse updates are the same computation (untouched
// rows have a zero, no-op gradient). Adam: lazy leaves untouched input rows alone, so the
// input weights differ while the run still learns.
TEST(OptimizerTraining, LazyEqualsExactWhereTheDocSaysSoOnly) {
    const Dataset in = planted("in"), out = planted("out");
    const NetworkConfig config = NetworkConfig::from_json(kAutoencoder);
    auto run = [&](OptimizerKind kind, SparseUpdate mode, double* loss) {
        Network net = Network::create(config, {{"in", in.cols}, {"out", out.cols}}, cpu_options(8));
        TrainOptions o;
        o.epochs = 2;
        o.batch = 16;  // small batches: many input rows are untouched in each
        o.optimizer.kind = kind;
        o.optimizer.learning_rate = kind == OptimizerKind::kSgd ? 0.5f : 0.005f;
        o.optimizer.sparse_update = mode;
        Trainer trainer(net, {{"in", &in}, {"out", &out}}, o);
        trainer.fit();
        if (loss) *loss = trainer.evaluate_loss();
        return all_parameters(net);
    };
    EXPECT_EQ(run(OptimizerKind::kSgd, SparseUpdate::kExact, nullptr),
              run(OptimizerKind::kSgd, SparseUpdate::kLazy, nullptr));
    double exact_loss = 0, lazy_loss = 0;
    const auto exact = run(OptimizerKind::kAdam, SparseUpdate::kExact, &exact_loss);
    const auto lazy = run(OptimizerKind::kAdam, SparseUpdate::kLazy, &lazy_loss);
    // parameters() lists the input weight matrix first.
    EXPECT_NE(exact[0], lazy[0]);
    EXPECT_LT(lazy_loss, 1.2 * exact_loss);
}

TEST(OptimizerTraining, OptionsOutOfRangeAreUsageErrors) {
    OneExample d;
    Network net = Network::create(NetworkConfig::from_json(linear_config("")), {{"x", 1}, {"y", 1}},
                                  cpu_options());
    std::vector<std::pair<std::string, OptimizerOptions>> bad;
    OptimizerOptions o;
    o.mu = 1.0f;
    bad.push_back({"mu", o});
    o = {};
    o.mu1 = -0.1f;
    bad.push_back({"mu1", o});
    o = {};
    o.learning_rate = -1.0f;
    bad.push_back({"learning rate", o});
    o = {};
    o.epsilon = 0.0f;
    bad.push_back({"epsilon", o});
    o = {};
    o.l1 = -1.0f;
    bad.push_back({"L1", o});
    for (const auto& [name, opt] : bad) {
        TrainOptions t;
        t.optimizer = opt;
        try {
            Trainer trainer(net, d.data(), t);
            ADD_FAILURE() << "expected Error for " << name;
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kUsage);
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace sparsenet
