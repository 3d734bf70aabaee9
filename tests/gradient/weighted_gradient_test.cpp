// Finite-difference checks of whole-network gradients with per-example weights on the Output
// dataset (DSSTNE's Weighted datasets), with and without SparseIgnoreZero: the analytic gradient
// of the mean weighted loss against central differences of Trainer::compute_loss, which is the
// weighted loss the gradient claims to differentiate.
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
    std::string output;  // output activation
    std::string loss;
    bool ignore_zero;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.output << " " << c.loss << (c.ignore_zero ? " ignore-zero" : "");
}

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
    return info.param.output + "_" + info.param.loss +
           (info.param.ignore_zero ? "_ignorezero" : "");
}

std::string config_json(const Case& c) {
    return R"({"Name": "weighted", "ErrorFunction": ")" + c.loss + R"(",
      "ScaledMarginalCrossEntropy": {"oneTarget": 1.0, "zeroTarget": 0.0, "oneScale": 1.3,
                                     "zeroScale": 0.7},
      "Layers": [
        {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
        {"Name": "H", "Kind": "Hidden", "N": 5, "Activation": "Tanh",
         "WeightInit": {"Scheme": "Gaussian", "Scale": 0.6, "Bias": 0.1}},
        {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Activation": ")" +
           c.output + R"(", "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5, "Bias": -0.2}}]})";
}

class WeightedGradient : public ::testing::TestWithParam<Case> {};

TEST_P(WeightedGradient, MatchesCentralDifferences) {
    const Case& c = GetParam();
    const uint32_t rows = 9;
    Dataset x = testing::random_dataset(rows, 6, testing::RowShape::kUniform, true, 31, "x");
    const bool valued = c.loss == "L2";
    Dataset y = testing::random_dataset(rows, 7, testing::RowShape::kUniform, valued, 32, "y");
    // Weights of every size, one of them 0 (the example then contributes nothing).
    y.weights = {1.0f, 2.5f, 0.0f, 0.3f, 1.7f, 3.0f, 0.8f, 1.0f, 2.0f};
    y.sparse_ignore_zero = c.ignore_zero;
    NetworkOptions no;
    no.device = "cpu";
    no.seed = 6;
    Network net =
        Network::create(NetworkConfig::from_json(config_json(c)), {{"x", 6}, {"y", 7}}, no);
    TrainOptions to;
    to.batch = rows;
    Trainer trainer(net, {{"x", &x}, {"y", &y}}, to);
    double largest = 0.0;
    EXPECT_GT(testing::check_gradients_numerically(net, trainer, 0, rows, 2e-3f, &largest), 60);
    EXPECT_GT(largest, 1e-2);  // the check is not vacuous
}

INSTANTIATE_TEST_SUITE_P(Losses, WeightedGradient,
                         ::testing::Values(Case{"Sigmoid", "CrossEntropy", false},
                                           Case{"Sigmoid", "CrossEntropy", true},
                                           Case{"Sigmoid", "ScaledMarginalCrossEntropy", false},
                                           Case{"Sigmoid", "ScaledMarginalCrossEntropy", true},
                                           Case{"Linear", "L2", false}, Case{"Linear", "L2", true},
                                           Case{"SoftMax", "CrossEntropy", false},
                                           Case{"SoftMax", "L2", true}),
                         name_of);

}  // namespace
}  // namespace sparsenet
