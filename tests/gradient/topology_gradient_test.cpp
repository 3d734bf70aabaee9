// Finite-difference checks of whole-network gradients for the topology part of the language:
// Skip (into Hidden and Output layers), several Sources (sparse Input and dense Hidden sources
// mixed in one layer), SharedWeights (a tied autoencoder whose Input edge owns the matrix and
// whose decoder uses it transposed, dense ties transposed and not, two Input edges sharing one
// embedding), several Input and Output layers (the losses summed). A shared matrix is one
// parameter: its gradient must be the sum over its uses.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

struct Data {
    std::string name;
    uint32_t cols;
    bool valued;
};

struct Case {
    std::string name;
    std::string loss;
    std::string layers;  // the JSON of $.Layers' elements
    std::vector<Data> data;
    size_t parameters;  // expected entries of Network::parameters()
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
    return info.param.name;
}

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.name;
}

// Gaussian initial weights large enough that every unit is off its linear regime.
const char* const kInit = R"("WeightInit": {"Scheme": "Gaussian", "Scale": 0.6, "Bias": 0.1})";

std::string layer(const std::string& body) {
    return "{" + body + ", " + kInit + "}";
}

std::vector<Case> cases() {
    std::vector<Case> all;
    // Skip into a Hidden layer and into the Output layer (from two layers).
    all.push_back(
        {"Skip",
         "CrossEntropy",
         R"({"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},)" +
             layer(R"("Name": "H1", "Kind": "Hidden", "N": 7, "Activation": "Tanh")") + "," +
             layer(
                 R"("Name": "H2", "Kind": "Hidden", "N": 7, "Skip": "H1", "Activation": "Tanh")") +
             "," + layer(R"("Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y",
                      "Source": "H2", "Skip": ["H1", "H2"], "Activation": "Sigmoid")"),
         {{"x", 6, true}, {"y", 7, false}},
         3 + 3});
    // A sparse Input source next to dense Hidden sources (and a second Input) in one layer.
    all.push_back(
        {"MixedSources",
         "L2",
         R"({"Name": "In1", "Kind": "Input", "N": "auto", "DataSet": "x1", "Sparse": true},
            {"Name": "In2", "Kind": "Input", "N": "auto", "DataSet": "x2", "Sparse": true},)" +
             layer(R"("Name": "H1", "Kind": "Hidden", "N": 4, "Source": "In1",
                      "Activation": "Sigmoid")") +
             "," + layer(R"("Name": "H2", "Kind": "Hidden", "N": 5, "Source": ["In1", "H1", "In2"],
                      "Activation": "Tanh")") +
             "," + layer(R"("Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y",
                      "Source": ["H2", "In2", "H1"], "Activation": "Linear")"),
         {{"x1", 6, true}, {"x2", 5, false}, {"y", 7, true}},
         7 + 3});
    // The tied autoencoder: In -> H owns M [6, 4]; H -> Out uses M transposed.
    all.push_back(
        {"TiedAutoencoder",
         "ScaledMarginalCrossEntropy",
         R"({"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},)" +
             layer(R"("Name": "H", "Kind": "Hidden", "N": 4, "Activation": "Sigmoid")") + "," +
             layer(R"("Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y",
                      "Activation": "Sigmoid", "SharedWeights": {"InputLayer": "H",
                      "SourceInputLayer": "In", "SourceOutputLayer": "H", "Transposed": true})"),
         {{"x", 6, true}, {"y", 6, false}},
         1 + 2});
    // Deeper ties: a transposed dense tie (H2 -> H3 uses H1 -> H2 transposed), an untransposed
    // dense tie (H1 -> H2b uses H1 -> H2), and the decoder tied to the Input edge.
    all.push_back(
        {"DenseTies",
         "CrossEntropy",
         R"({"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},)" +
             layer(R"("Name": "H1", "Kind": "Hidden", "N": 5, "Activation": "Tanh")") + "," +
             layer(R"("Name": "H2", "Kind": "Hidden", "N": 4, "Activation": "Sigmoid")") + "," +
             layer(R"("Name": "H2b", "Kind": "Hidden", "N": 4, "Source": "H1",
                      "Activation": "Tanh", "SharedWeights": [{"InputLayer": "H1",
                      "SourceInputLayer": "H1", "SourceOutputLayer": "H2"}])") +
             "," + layer(R"("Name": "H3", "Kind": "Hidden", "N": 5, "Source": "H2",
                      "Activation": "Sigmoid", "SharedWeights": {"InputLayer": "H2",
                      "SourceInputLayer": "H1", "SourceOutputLayer": "H2", "Transposed": true})") +
             "," + layer(R"("Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y",
                      "Source": ["H3", "H2b"], "Activation": "Sigmoid")"),
         {{"x", 6, false}, {"y", 6, false}},
         // In->H1, H1->H2, H3->Out, H2b->Out; five biases
         4 + 5});
    // Two Input edges share one embedding matrix (both row-sparse uses summed), on one layer
    // and on another layer.
    all.push_back({"SharedEmbedding",
                   "CrossEntropy",
                   R"({"Name": "In1", "Kind": "Input", "N": 6, "DataSet": "x1", "Sparse": true},
            {"Name": "In2", "Kind": "Input", "N": 6, "DataSet": "x2", "Sparse": true},)" +
                       layer(R"("Name": "H", "Kind": "Hidden", "N": 4, "Source": ["In1", "In2"],
                      "Activation": "Tanh", "SharedWeights": {"InputLayer": "In2",
                      "SourceInputLayer": "In1", "SourceOutputLayer": "H"})") +
                       "," + layer(R"("Name": "H2", "Kind": "Hidden", "N": 4, "Source": "In2",
                      "Activation": "Sigmoid", "SharedWeights": {"InputLayer": "In2",
                      "SourceInputLayer": "In1", "SourceOutputLayer": "H"})") +
                       "," + layer(R"("Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y",
                      "Source": ["H", "H2"], "Activation": "Sigmoid")"),
                   {{"x1", 6, true}, {"x2", 5, false}, {"y", 7, false}},
                   3 + 3});
    // Several outputs (one SoftMax), several inputs; the objective sums both losses.
    all.push_back(
        {"SeveralOutputs",
         "CrossEntropy",
         R"({"Name": "In1", "Kind": "Input", "N": "auto", "DataSet": "x1", "Sparse": true},
            {"Name": "In2", "Kind": "Input", "N": "auto", "DataSet": "x2", "Sparse": true},)" +
             layer(R"("Name": "H", "Kind": "Hidden", "N": 5, "Source": ["In1", "In2"],
                      "Activation": "Tanh")") +
             "," + layer(R"("Name": "Out1", "Kind": "Output", "N": "auto", "DataSet": "y1",
                      "Source": "H", "Activation": "Sigmoid")") +
             "," + layer(R"("Name": "Out2", "Kind": "Output", "N": "auto", "DataSet": "y2",
                      "Source": ["H", "In2"], "Activation": "SoftMax")"),
         {{"x1", 6, true}, {"x2", 5, false}, {"y1", 7, false}, {"y2", 4, false}},
         5 + 3});
    // All of it at once: a tied autoencoder with a skip and a second output.
    all.push_back(
        {"TiedSkipTwoOutputs",
         "L2",
         R"({"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},)" +
             layer(R"("Name": "H1", "Kind": "Hidden", "N": 4, "Activation": "Sigmoid")") + "," +
             layer(R"("Name": "H2", "Kind": "Hidden", "N": 4, "Skip": "H1",
                      "Activation": "SoftSign")") +
             "," + layer(R"("Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y",
                      "Source": "H2", "Activation": "Sigmoid", "SharedWeights": {"InputLayer":
                      "H2", "SourceInputLayer": "In", "SourceOutputLayer": "H1",
                      "Transposed": true})") +
             "," + layer(R"("Name": "Side", "Kind": "Output", "N": "auto", "DataSet": "z",
                      "Source": ["H1", "H2"], "Skip": "H2", "Activation": "Linear")"),
         {{"x", 6, true}, {"y", 6, true}, {"z", 4, true}},
         4 + 4});
    return all;
}

class TopologyGradient : public ::testing::TestWithParam<Case> {};

TEST_P(TopologyGradient, MatchesCentralDifferences) {
    const Case& c = GetParam();
    const std::string json = R"({"Version": 0.9, "Name": "topology", "ErrorFunction": ")" + c.loss +
                             R"(", "ScaledMarginalCrossEntropy": {"oneTarget": 1.0,
                              "zeroTarget": 0.0, "oneScale": 1.7, "zeroScale": 0.6},
                              "Layers": [)" +
                             c.layers + "]}";
    const NetworkConfig config = NetworkConfig::from_json(json);
    std::vector<Dataset> data;
    uint64_t seed = 30;
    for (const Data& d : c.data) {
        data.push_back(testing::random_dataset(9, d.cols, testing::RowShape::kEmptyRows, d.valued,
                                               seed++, d.name));
    }
    std::map<std::string, uint32_t> widths;
    std::map<std::string, const Dataset*> bound;
    for (const Dataset& d : data) {
        widths[d.name] = d.cols;
        bound[d.name] = &d;
    }
    NetworkOptions no;
    no.device = "cpu";
    no.seed = 4;
    Network net = Network::create(config, widths, no);
    TrainOptions to;
    to.batch = 9;
    Trainer trainer(net, bound, to);
    EXPECT_EQ(net.parameters().size(), c.parameters);
    EXPECT_EQ(trainer.compute_gradients(0, 9).size(), c.parameters);
    EXPECT_GE(testing::check_gradients_numerically(net, trainer, 0, 9, 2e-3f), 30);
}

INSTANTIATE_TEST_SUITE_P(Topology, TopologyGradient, ::testing::ValuesIn(cases()), name_of);

}  // namespace
}  // namespace sparsenet
