// FixedWeights (config.h): an Input -> layer edge fitted in closed form (EASE, linear_fit.h)
// before a new network's first step and never trained. Checked here: the fit against the formula
// computed independently in double; the matrix set before the first step and unchanged by
// training while the other parameters train; no gradient and no optimizer state for it; with
// InTraining false, training is exactly that of the network without the edge and inference adds
// the path; gradients of the other parameters still match finite differences with the path in
// the forward pass; model files and checkpoints keep it (a resumed run continues bit-exactly);
// the shapes the fit cannot serve are refused by JSON path.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/linear_fit.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

constexpr uint64_t kRows = 48;
constexpr uint32_t kItems = 10;

NetworkOptions cpu_options() {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 5;
    return o;
}

Dataset items(bool with_values = false) {
    return testing::random_dataset(kRows, kItems, testing::RowShape::kPowerLaw, with_values, 21,
                                   "x");
}

// EASE in double: G = X^T X + lambda I inverted by Gauss-Jordan with partial pivoting,
// B[i][j] = -P[i][j] / P[j][j], zero diagonal, times scale.
std::vector<double> ease_reference(const Dataset& x, double lambda, double scale) {
    const size_t n = x.cols;
    std::vector<double> g(n * n, 0.0), p(n * n, 0.0);
    for (uint64_t r = 0; r < x.rows; ++r)
        for (uint64_t a = x.offsets[r]; a < x.offsets[r + 1]; ++a)
            for (uint64_t b = x.offsets[r]; b < x.offsets[r + 1]; ++b)
                g[x.indices[a] * n + x.indices[b]] +=
                    (x.values.empty() ? 1.0 : x.values[a]) * (x.values.empty() ? 1.0 : x.values[b]);
    for (size_t i = 0; i < n; ++i) {
        g[i * n + i] += lambda;
        p[i * n + i] = 1.0;
    }
    for (size_t c = 0; c < n; ++c) {
        size_t pivot = c;
        for (size_t r = c + 1; r < n; ++r)
            if (std::fabs(g[r * n + c]) > std::fabs(g[pivot * n + c])) pivot = r;
        for (size_t k = 0; k < n; ++k) {
            std::swap(g[c * n + k], g[pivot * n + k]);
            std::swap(p[c * n + k], p[pivot * n + k]);
        }
        const double d = g[c * n + c];
        for (size_t k = 0; k < n; ++k) {
            g[c * n + k] /= d;
            p[c * n + k] /= d;
        }
        for (size_t r = 0; r < n; ++r) {
            if (r == c) continue;
            const double f = g[r * n + c];
            for (size_t k = 0; k < n; ++k) {
                g[r * n + k] -= f * g[c * n + k];
                p[r * n + k] -= f * p[c * n + k];
            }
        }
    }
    std::vector<double> b(n * n);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j)
            b[i * n + j] = i == j ? 0.0 : -scale * p[i * n + j] / p[j * n + j];
    return b;
}

void expect_matches(const std::vector<float>& got, const std::vector<double>& want,
                    const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double largest = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i])) << what << "[" << i << "]";
        largest = std::max(largest, std::fabs(want[i]));
    }
    EXPECT_GT(largest, 1e-2) << what << ": a vacuous comparison";
}

TEST(LinearFit, EaseMatrixMatchesTheClosedFormInDouble) {
    for (bool valued : {false, true}) {
        const Dataset x = items(valued);
        for (float lambda : {0.5f, 20.0f}) {
            SCOPED_TRACE(std::string(valued ? "valued" : "boolean") + ", lambda " +
                         std::to_string(lambda));
            expect_matches(engine::ease_matrix(x, lambda, 3.0f), ease_reference(x, lambda, 3.0),
                           "B");
        }
    }
}

// In (x) -> H (4, tanh) -> Out (x, sigmoid), with Out also reading In through the fixed edge.
std::string config(const std::string& fixed = R"("Source": "In", "Lambda": 4, "Scale": 2)",
                   const std::string& out_sources = R"(["H", "In"])") {
    return R"({ "Name": "fixed", "ShuffleIndices": false, "Denoising": { "p": 0.2 },
        "Layers": [
        { "Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true },
        { "Name": "H", "Kind": "Hidden", "N": 4, "Activation": "Tanh", "Source": "In" },
        { "Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "x", "Sparse": true,
          "Activation": "Sigmoid", "Source": )" +
           out_sources + (fixed.empty() ? "" : R"(, "FixedWeights": { )" + fixed + " }") + " } ] }";
}

TrainOptions adam(uint32_t epochs) {
    TrainOptions to;
    to.batch = 16;
    to.epochs = epochs;
    to.optimizer.kind = OptimizerKind::kAdam;
    to.optimizer.learning_rate = 0.05f;
    to.optimizer.l2 = 0.01f;  // would shrink the fixed matrix if it were trained
    return to;
}

TEST(FixedWeights, FittedBeforeTheFirstStepAndNeverTrained) {
    const Dataset x = items();
    Network net =
        Network::create(NetworkConfig::from_json(config()), {{"x", kItems}}, cpu_options());
    EXPECT_EQ(net.get_parameter("weight:In->Out"), std::vector<float>(kItems * kItems, 0.0f));
    Trainer trainer(net, {{"x", &x}}, adam(3));
    const std::vector<float> fitted = net.get_parameter("weight:In->Out");
    expect_matches(fitted, ease_reference(x, 4.0, 2.0), "fitted before the first step");
    const std::vector<float> h_before = net.get_parameter("weight:H->Out");
    const double loss0 = trainer.evaluate_loss();
    trainer.fit();
    EXPECT_EQ(net.get_parameter("weight:In->Out"), fitted);
    EXPECT_NE(net.get_parameter("weight:H->Out"), h_before);
    EXPECT_LT(trainer.evaluate_loss(), loss0);
    // Not a trained parameter: no gradient; still a parameter of the model.
    const auto grads = trainer.compute_gradients(0, kRows);
    EXPECT_EQ(grads.count("weight:In->Out"), 0u);
    EXPECT_EQ(grads.count("weight:H->Out"), 1u);
    bool listed = false;
    for (const Parameter& p : net.parameters()) listed = listed || p.name == "weight:In->Out";
    EXPECT_TRUE(listed);
    // A second Trainer on the same (no longer new) network keeps the matrix.
    const Dataset other =
        testing::random_dataset(kRows, kItems, testing::RowShape::kUniform, false, 99, "x");
    Trainer again(net, {{"x", &other}}, adam(1));
    EXPECT_EQ(net.get_parameter("weight:In->Out"), fitted);
}

// Input values that weigh the entries (split fixed --recency): the fit uses them unless the
// entry has Indicator, which fits on the rows' 0/1 pattern.
TEST(FixedWeights, IndicatorFitsOnTheRowsPatternNotTheirValues) {
    const Dataset x = items(true);
    ASSERT_FALSE(x.is_boolean());
    Dataset pattern = x;
    pattern.values.clear();
    for (bool indicator : {false, true}) {
        SCOPED_TRACE(indicator ? "Indicator" : "values");
        const std::string fixed = R"("Source": "In", "Lambda": 4, "Scale": 2)" +
                                  std::string(indicator ? R"(, "Indicator": true)" : "");
        Network net = Network::create(NetworkConfig::from_json(config(fixed)), {{"x", kItems}},
                                      cpu_options());
        Trainer trainer(net, {{"x", &x}}, adam(1));
        expect_matches(net.get_parameter("weight:In->Out"),
                       ease_reference(indicator ? pattern : x, 4.0, 2.0), "fitted");
    }
    // Both fits of one edge: the graph filter's with Indicator equals its fit on the pattern.
    const std::string both = R"("Source": "In", "Lambda": 4, "Scale": 2 }, { "Source": "In",
        "Fit": "GraphFilter", "Scale": 3, "Indicator": true)";
    std::string json = config(both);  // { A }, { B } made an array: [{ A }, { B }]
    json.replace(json.find(R"("FixedWeights": { )"), 18, R"("FixedWeights": [{ )");
    json.replace(json.rfind(" } } ] }"), 8, " }] } ] }");
    Network net = Network::create(NetworkConfig::from_json(json), {{"x", kItems}}, cpu_options());
    Trainer trainer(net, {{"x", &x}}, adam(1));
    engine::GraphFilterFit gf;
    const std::vector<float> filter = engine::graph_filter_matrix(pattern, gf, 3.0f);
    const std::vector<double> ease = ease_reference(x, 4.0, 2.0);
    std::vector<double> want(ease.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = ease[i] + filter[i];
    expect_matches(net.get_parameter("weight:In->Out"), want, "EASE on values + filter on 0/1");
}

TEST(FixedWeights, GradientsOfTheOtherParametersMatchFiniteDifferences) {
    const Dataset x = items();
    Network net =
        Network::create(NetworkConfig::from_json(config()), {{"x", kItems}}, cpu_options());
    Trainer trainer(net, {{"x", &x}}, adam(1));
    double largest = 0.0;
    const int checked = testing::check_gradients_numerically(net, trainer, 0, 12, 1e-3, &largest,
                                                             {"weight:In->Out"});
    EXPECT_GT(checked, 0);
    EXPECT_GT(largest, 1e-4);
}

TEST(FixedWeights, InferenceOnlyPathLeavesTrainingAsWithoutTheEdge) {
    const Dataset x = items();
    Network with =
        Network::create(NetworkConfig::from_json(config(R"("Source": "In", "Lambda": 4, "Scale": 2,
                                           "InTraining": false)")),
                        {{"x", kItems}}, cpu_options());
    Network without = Network::create(NetworkConfig::from_json(config("", R"(["H"])")),
                                      {{"x", kItems}}, cpu_options());
    Trainer(with, {{"x", &x}}, adam(3)).fit();
    Trainer(without, {{"x", &x}}, adam(3)).fit();
    for (const char* name : {"weight:In->H", "weight:H->Out", "bias:H", "bias:Out"}) {
        EXPECT_EQ(with.get_parameter(name), without.get_parameter(name)) << name;
    }
    // Inference adds the path: Out = sigmoid(logit(Out without) + x . W) for every row.
    const std::vector<float> w = with.get_parameter("weight:In->Out");
    const std::vector<float> a = Predictor(with, {{"x", &x}}).scores(0, kRows);
    const std::vector<float> b = Predictor(without, {{"x", &x}}).scores(0, kRows);
    double moved = 0.0;
    for (uint64_t r = 0; r < kRows; ++r) {
        for (uint32_t j = 0; j < kItems; ++j) {
            double path = 0.0;
            for (uint64_t e = x.offsets[r]; e < x.offsets[r + 1]; ++e)
                path += w[x.indices[e] * kItems + j];
            const double pb = b[r * kItems + j];
            const double want = 1.0 / (1.0 + std::exp(-(std::log(pb / (1.0 - pb)) + path)));
            EXPECT_NEAR(a[r * kItems + j], want, 2e-5) << r << "," << j;
            moved = std::max(moved, std::fabs(want - pb));
        }
    }
    EXPECT_GT(moved, 1e-2);
}

TEST(FixedWeights, ModelFilesAndCheckpointsKeepItAndAResumeIsBitExact) {
    const Dataset x = items();
    testing::TempDir dir;
    Network net =
        Network::create(NetworkConfig::from_json(config()), {{"x", kItems}}, cpu_options());
    Trainer trainer(net, {{"x", &x}}, adam(2));
    trainer.train_epoch();
    trainer.save_checkpoint(dir.file("ckpt.nc"));
    trainer.train_epoch();
    net.save(dir.file("model.nc"));

    const Network loaded = Network::load(dir.file("model.nc"), cpu_options());
    for (const Parameter& p : net.parameters()) {
        EXPECT_EQ(loaded.get_parameter(p.name), net.get_parameter(p.name)) << p.name;
    }
    Network resumed_net =
        Network::create(NetworkConfig::from_json(config()), {{"x", kItems}}, cpu_options());
    Trainer resumed(resumed_net, {{"x", &x}}, adam(2));
    resumed.resume(dir.file("ckpt.nc"));
    resumed.train_epoch();
    for (const Parameter& p : net.parameters()) {
        EXPECT_EQ(resumed_net.get_parameter(p.name), net.get_parameter(p.name)) << p.name;
    }
}

TEST(FixedWeights, AnEdgeThatIsNotItemToItemIsRefusedByPath) {
    // In (x, 10 items) -> H (4) with a fixed edge: [10, 4] is no item-item matrix.
    const std::string json = R"({ "Layers": [
        { "Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true },
        { "Name": "H", "Kind": "Hidden", "N": 4, "Source": "In",
          "FixedWeights": { "Source": "In", "Lambda": 1 } },
        { "Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "x", "Sparse": true } ] })";
    try {
        Network::create(NetworkConfig::from_json(json), {{"x", kItems}}, cpu_options());
        FAIL() << "no error thrown";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kConfig) << e.what();
        EXPECT_NE(std::string(e.what()).find("$.Layers[1].FixedWeights"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("[10, 4]"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace sparsenet
