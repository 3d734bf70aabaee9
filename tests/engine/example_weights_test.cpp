// Per-example weights on the Output dataset (DSSTNE's Weighted datasets): an example of weight 2
// counts exactly like the example appearing twice, in the summed loss, in its gradient and in
// full-batch training; a weighted row's loss is the unweighted one times its weight. (The
// finite-difference check is in tests/gradient/weighted_gradient_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

std::string config_json(const std::string& output, const std::string& loss) {
    return R"({"Name": "w", "ErrorFunction": ")" + loss + R"(", "ShuffleIndices": false,
      "Layers": [
        {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
        {"Name": "H", "Kind": "Hidden", "N": 6, "Activation": "Sigmoid",
         "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5}},
        {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Activation": ")" +
           output + R"(", "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5, "Bias": -0.5}}]})";
}

NetworkOptions cpu_options() {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 17;
    return o;
}

// Row r of d, appended to out.
void append_row(const Dataset& d, uint64_t r, Dataset& out) {
    for (uint64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e) {
        out.indices.push_back(d.indices[e]);
        if (!d.values.empty()) out.values.push_back(d.values[e]);
    }
    out.offsets.push_back(out.indices.size());
    out.rows++;
}

// The examples of `d` repeated as `copies` says (copies[r] times each), unweighted.
Dataset repeated(const Dataset& d, const std::vector<int>& copies) {
    Dataset out;
    out.name = d.name;
    out.cols = d.cols;
    out.sparse_ignore_zero = d.sparse_ignore_zero;
    for (uint64_t r = 0; r < d.rows; ++r)
        for (int k = 0; k < copies[r]; ++k) append_row(d, r, out);
    return out;
}

struct Fixture {
    Dataset x, y;    // weighted targets
    Dataset xd, yd;  // duplicated, unweighted
    uint32_t n = 0, nd = 0;
    Fixture(bool valued_targets, bool ignore_zero) {
        x = testing::random_dataset(7, 9, testing::RowShape::kUniform, true, 41, "x");
        y = testing::random_dataset(7, 8, testing::RowShape::kUniform, valued_targets, 42, "y");
        y.sparse_ignore_zero = ignore_zero;
        const std::vector<int> copies = {1, 2, 1, 3, 0, 1, 2};  // weight k = k copies
        for (int c : copies) y.weights.push_back(float(c));
        xd = repeated(x, copies);
        yd = repeated(y, copies);
        n = uint32_t(x.rows);
        nd = uint32_t(xd.rows);
    }
};

struct Case {
    std::string output, loss;
    bool valued, ignore_zero;
};

const std::vector<Case> kCases = {{"Sigmoid", "CrossEntropy", false, false},
                                  {"Sigmoid", "ScaledMarginalCrossEntropy", false, true},
                                  {"Linear", "L2", true, false},
                                  {"SoftMax", "CrossEntropy", false, false},
                                  {"Tanh", "L1", true, true}};

TEST(ExampleWeights, WeightKEqualsKCopiesInTheSummedLossAndGradient) {
    for (const Case& c : kCases) {
        SCOPED_TRACE(c.output + " " + c.loss + (c.ignore_zero ? " ignore-zero" : ""));
        const Fixture f(c.valued, c.ignore_zero);
        ASSERT_EQ(f.nd, 10u);
        Network net = Network::create(NetworkConfig::from_json(config_json(c.output, c.loss)),
                                      {{"x", 9}, {"y", 8}}, cpu_options());
        TrainOptions o;
        Trainer weighted(net, {{"x", &f.x}, {"y", &f.y}}, o);
        Trainer copies(net, {{"x", &f.xd}, {"y", &f.yd}}, o);
        // compute_loss is the mean over the examples given: compare the sums.
        const double sum_w = weighted.compute_loss(0, f.n) * f.n;
        const double sum_c = copies.compute_loss(0, f.nd) * f.nd;
        EXPECT_GT(sum_c, 0.1);
        EXPECT_NEAR(sum_w, sum_c, 1e-5 * sum_c);
        // Gradients of the mean: scale back to the gradient of the sum.
        const auto gw = weighted.compute_gradients(0, f.n);
        const auto gc = copies.compute_gradients(0, f.nd);
        for (const auto& [name, values] : gw) {
            const std::vector<float>& other = gc.at(name);
            for (size_t i = 0; i < values.size(); ++i) {
                const double a = double(values[i]) * f.n, b = double(other[i]) * f.nd;
                EXPECT_NEAR(a, b, 1e-5 + 1e-4 * std::abs(b)) << name << "[" << i << "]";
            }
        }
    }
}

// Full-batch SGD with the learning rate scaled by the batch size follows the gradient of the
// summed loss, so the weighted and the duplicated data train to the same parameters.
TEST(ExampleWeights, FullBatchTrainingMatchesDuplicatedExamples) {
    const Fixture f(false, false);
    const NetworkConfig config = NetworkConfig::from_json(config_json("Sigmoid", "CrossEntropy"));
    auto train = [&](const Dataset& x, const Dataset& y, uint32_t n) {
        Network net = Network::create(config, {{"x", 9}, {"y", 8}}, cpu_options());
        TrainOptions o;
        o.epochs = 5;
        o.batch = n;
        o.optimizer.learning_rate = 0.05f * float(n);
        Trainer trainer(net, {{"x", &x}, {"y", &y}}, o);
        trainer.fit();
        std::vector<float> all;
        for (const Parameter& p : net.parameters()) {
            const std::vector<float> v = net.get_parameter(p.name);
            all.insert(all.end(), v.begin(), v.end());
        }
        return all;
    };
    const std::vector<float> a = train(f.x, f.y, f.n);
    const std::vector<float> b = train(f.xd, f.yd, f.nd);
    const std::vector<float> start = [&] {
        Network net = Network::create(config, {{"x", 9}, {"y", 8}}, cpu_options());
        std::vector<float> all;
        for (const Parameter& p : net.parameters()) {
            const std::vector<float> v = net.get_parameter(p.name);
            all.insert(all.end(), v.begin(), v.end());
        }
        return all;
    }();
    ASSERT_EQ(a.size(), b.size());
    double moved = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(a[i], b[i], 2e-5) << i;
        moved = std::max(moved, std::abs(double(a[i]) - start[i]));
    }
    EXPECT_GT(moved, 1e-2);  // training did change the parameters
}

// The reported (mean) loss is the sum of the weighted example losses over the example count;
// weight 0 removes an example, and an all-zero weighting gives zero loss and gradient.
TEST(ExampleWeights, WeightsScaleEachExamplesLoss) {
    const Fixture f(false, false);
    Network net = Network::create(NetworkConfig::from_json(config_json("Sigmoid", "CrossEntropy")),
                                  {{"x", 9}, {"y", 8}}, cpu_options());
    Dataset plain = f.y;
    plain.weights.clear();
    TrainOptions o;
    Trainer unweighted(net, {{"x", &f.x}, {"y", &plain}}, o);
    Trainer weighted(net, {{"x", &f.x}, {"y", &f.y}}, o);
    double expected = 0.0;
    for (uint32_t r = 0; r < f.n; ++r) expected += f.y.weights[r] * unweighted.compute_loss(r, 1);
    EXPECT_NEAR(weighted.compute_loss(0, f.n) * f.n, expected, 1e-5 * expected);
    // Example 4 has weight 0.
    EXPECT_EQ(weighted.compute_loss(4, 1), 0.0);
    for (const auto& [name, g] : weighted.compute_gradients(4, 1))
        for (float v : g) EXPECT_EQ(v, 0.0f) << name;
}

}  // namespace
}  // namespace sparsenet
