// Finite-difference checks of whole-network gradients (engine + CPU backend, float): every
// hidden activation (with non-default RELUSlope / ELUAlpha / SELULambda), every loss with output
// activations it is valid with, the sparseness penalty (network-wide and per layer), several
// sources per layer, sparse boolean and valued inputs. The double-precision checks of each
// formula are in formula_gradient_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

struct Case {
    std::string hidden;  // hidden activation
    std::string output;  // output activation
    std::string loss;
    bool valued_input;
    bool two_hidden;          // Input -> H1 -> H2, Output <- {H1, H2}
    bool sparseness = false;  // SparsenessPenalty on the (sparse) hidden layers
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
    const Case& c = info.param;
    return c.hidden + "_" + c.output + "_" + c.loss + (c.valued_input ? "_valued" : "_boolean") +
           (c.two_hidden ? "_twohidden" : "") + (c.sparseness ? "_sparseness" : "");
}

// Losses that read the target's value (the others are trained on boolean targets).
bool valued_targets(const std::string& loss) {
    return loss == "L2" || loss == "L1" || loss == "L2Hinge" || loss == "Hinge" ||
           loss == "DataScaledMarginalCrossEntropy";
}

std::string config_json(const Case& c) {
    // H1 uses the network's sparseness penalty, H2 overrides it.
    const std::string sparse = c.sparseness ? R"(, "Sparse": true)" : "";
    std::string layers =
        R"({"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
           {"Name": "H1", "Kind": "Hidden", "N": 5, "Activation": ")" +
        c.hidden + R"(", "WeightInit": {"Scheme": "Gaussian", "Scale": 0.6, "Bias": 0.1})" +
        sparse + "},";
    std::string out_sources = R"("H1")";
    if (c.two_hidden) {
        layers += R"({"Name": "H2", "Kind": "Hidden", "N": 4, "Source": "H1", "Activation": ")" +
                  c.hidden + R"(", "WeightInit": {"Scheme": "Uniform", "Scale": 0.7})" + sparse +
                  (c.sparseness ? R"(, "SparsenessPenalty": {"p": 0.3, "beta": 1.3})" : "") + "},";
        out_sources = R"("H1", "H2")";
    }
    layers += R"({"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Source": [)" +
              out_sources + R"(], "Activation": ")" + c.output +
              R"(", "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5, "Bias": -0.2}})";
    return R"({"Version": 0.9, "Name": "grad", "ErrorFunction": ")" + c.loss +
           R"(", "ScaledMarginalCrossEntropy": {"oneTarget": 1.0, "zeroTarget": 0.0,
              "oneScale": 1.7, "zeroScale": 0.6},
              "RELUSlope": 0.15, "ELUAlpha": 0.8, "SELULambda": 1.2,
              "SparsenessPenalty": {"p": 0.1, "beta": 0.7}, "Layers": [)" +
           layers + "]}";
}

class NetworkGradient : public ::testing::TestWithParam<Case> {};

TEST_P(NetworkGradient, MatchesCentralDifferences) {
    const Case& c = GetParam();
    const NetworkConfig config = NetworkConfig::from_json(config_json(c));
    Dataset x =
        testing::random_dataset(9, 6, testing::RowShape::kEmptyRows, c.valued_input, 21, "x");
    const bool valued_target = valued_targets(c.loss);
    Dataset y = testing::random_dataset(9, 7, testing::RowShape::kUniform, valued_target, 22, "y");
    NetworkOptions no;
    no.device = "cpu";
    no.seed = 4;
    Network net = Network::create(config, {{"x", 6}, {"y", 7}}, no);
    TrainOptions to;
    to.batch = 9;
    Trainer trainer(net, {{"x", &x}, {"y", &y}}, to);
    // h small enough that no ReLU unit crosses its kink here.
    EXPECT_GT(testing::check_gradients_numerically(net, trainer, 0, 9, 2e-3f), 60);
}

std::vector<Case> cases() {
    std::vector<Case> all;
    for (const char* hidden :
         {"Sigmoid", "Tanh", "RectifiedLinear", "Linear", "LeakyRectifiedLinear",
          "ExponentialLinear", "ScaledExponentialLinear", "SoftPlus", "SoftSign"}) {
        all.push_back({hidden, "Sigmoid", "ScaledMarginalCrossEntropy", false, false});
    }
    const std::vector<std::pair<const char*, const char*>> heads = {
        {"Sigmoid", "CrossEntropy"},
        {"SoftMax", "CrossEntropy"},
        {"Sigmoid", "L2"},
        {"Tanh", "L2"},
        {"Linear", "L2"},
        {"SoftMax", "L2"},
        {"SoftMax", "ScaledMarginalCrossEntropy"},
        {"Linear", "L1"},
        {"Tanh", "L1"},
        {"SoftMax", "L1"},
        {"Sigmoid", "L2Hinge"},
        {"Linear", "L2Hinge"},
        {"SoftMax", "L2Hinge"},
        {"Linear", "Hinge"},
        {"Tanh", "Hinge"},
        {"SoftMax", "Hinge"},
        {"Sigmoid", "DataScaledMarginalCrossEntropy"},
        {"LeakyRectifiedLinear", "L2"},
        {"ExponentialLinear", "L2"},
        {"ScaledExponentialLinear", "L2"},
        {"SoftPlus", "L2"},
        {"SoftSign", "L2"},
        {"SoftSign", "L1"}};
    for (const auto& [out, loss] : heads) all.push_back({"Tanh", out, loss, true, false});
    all.push_back({"Sigmoid", "Sigmoid", "CrossEntropy", true, true});
    all.push_back({"Tanh", "SoftMax", "CrossEntropy", false, true});
    // The sparseness penalty: network-wide on H1, overridden on H2.
    all.push_back({"Sigmoid", "Sigmoid", "ScaledMarginalCrossEntropy", false, true, true});
    all.push_back({"SoftPlus", "Linear", "L2", true, true, true});
    return all;
}

INSTANTIATE_TEST_SUITE_P(AllPairs, NetworkGradient, ::testing::ValuesIn(cases()), name_of);

}  // namespace
}  // namespace sparsenet
