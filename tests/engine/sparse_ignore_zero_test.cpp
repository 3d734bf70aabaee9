// SparseIgnoreZero end to end: a target dataset written with the attribute, read back from the
// netCDF file and bound to an Output layer, makes the loss count its stored targets only (values
// computed here from the network's parameters) and gives absent targets no gradient.
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

const char* kConfig = R"({"Name": "iz", "ErrorFunction": "CrossEntropy", "ShuffleIndices": false,
  "Layers": [
    {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
    {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Activation": "Sigmoid",
     "WeightInit": {"Scheme": "Gaussian", "Scale": 0.7, "Bias": -0.3}}]})";

NetworkOptions cpu_options() {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 23;
    return o;
}

// Mean cross-entropy per example, in double from the parameters: over the stored targets only
// (ignore_zero), or over every column with absent targets = 0.
double expected_loss(const Network& net, const Dataset& x, const Dataset& y, bool ignore_zero) {
    const std::vector<float> w = net.get_parameter("weight:In->Out");
    const std::vector<float> b = net.get_parameter("bias:Out");
    const size_t n = b.size();
    double total = 0.0;
    for (uint64_t r = 0; r < x.rows; ++r) {
        std::vector<double> z(b.begin(), b.end());
        for (uint64_t e = x.offsets[r]; e < x.offsets[r + 1]; ++e)
            for (size_t j = 0; j < n; ++j)
                z[j] += double(x.values.empty() ? 1.0f : x.values[e]) * w[x.indices[e] * n + j];
        std::vector<double> t(n, 0.0);
        std::vector<bool> stored(n, false);
        for (uint64_t e = y.offsets[r]; e < y.offsets[r + 1]; ++e) {
            t[y.indices[e]] = y.values.empty() ? 1.0 : y.values[e];
            stored[y.indices[e]] = true;
        }
        for (size_t j = 0; j < n; ++j) {
            if (ignore_zero && !stored[j]) continue;
            const double a = 1.0 / (1.0 + std::exp(-z[j]));
            total += -t[j] * std::log(a) - (1 - t[j]) * std::log(1 - a);
        }
    }
    return total / double(x.rows);
}

TEST(SparseIgnoreZero, FromTheDatasetFileToTheLoss) {
    testing::TempDir dir;
    Dataset x = testing::random_dataset(12, 10, testing::RowShape::kUniform, true, 51, "x");
    Dataset y = testing::random_dataset(12, 15, testing::RowShape::kUniform, false, 52, "y");
    y.sparse_ignore_zero = true;
    const std::string path = dir.file("data.nc");
    write_datasets(path, {x, y});
    const std::vector<Dataset> files = read_datasets(path);
    ASSERT_EQ(files.size(), 2u);
    const Dataset& fx = files[0];
    const Dataset& fy = files[1];
    ASSERT_TRUE(fy.sparse_ignore_zero);
    Dataset fy_plain = fy;
    fy_plain.sparse_ignore_zero = false;

    Network net =
        Network::create(NetworkConfig::from_json(kConfig), {{"x", 10}, {"y", 15}}, cpu_options());
    TrainOptions o;
    Trainer ignoring(net, {{"x", &fx}, {"y", &fy}}, o);
    Trainer plain(net, {{"x", &fx}, {"y", &fy_plain}}, o);
    const double with = ignoring.evaluate_loss();
    const double without = plain.evaluate_loss();
    EXPECT_NEAR(with, expected_loss(net, fx, fy, true), 1e-5 * with);
    EXPECT_NEAR(without, expected_loss(net, fx, fy, false), 1e-5 * without);
    EXPECT_LT(with, 0.8 * without);  // most columns are absent targets

    // Columns no example stores get no gradient at all: their bias gradient is exactly 0 with
    // SparseIgnoreZero (and not without it).
    std::vector<bool> stored(15, false);
    for (uint32_t c : fy.indices) stored[c] = true;
    const auto g_ignore = ignoring.compute_gradients(0, 12);
    const auto g_plain = plain.compute_gradients(0, 12);
    int absent = 0;
    for (size_t j = 0; j < 15; ++j) {
        if (stored[j]) continue;
        ++absent;
        EXPECT_EQ(g_ignore.at("bias:Out")[j], 0.0f) << j;
        EXPECT_NE(g_plain.at("bias:Out")[j], 0.0f) << j;
    }
    ASSERT_GT(absent, 0) << "the data should leave some output column unstored";
}

// Training with the attribute on pushes stored targets up but leaves never-stored columns'
// biases exactly where they started.
TEST(SparseIgnoreZero, TrainingNeverTouchesAbsentColumns) {
    Dataset x = testing::random_dataset(40, 10, testing::RowShape::kUniform, false, 61, "x");
    Dataset y = testing::random_dataset(40, 15, testing::RowShape::kUniform, false, 62, "y");
    // Column 14 is never stored.
    Dataset y2 = y;
    y2.indices.clear();
    y2.offsets = {0};
    for (uint64_t r = 0; r < y.rows; ++r) {
        for (uint64_t e = y.offsets[r]; e < y.offsets[r + 1]; ++e)
            if (y.indices[e] != 14) y2.indices.push_back(y.indices[e]);
        y2.offsets.push_back(y2.indices.size());
    }
    y2.sparse_ignore_zero = true;
    Network net =
        Network::create(NetworkConfig::from_json(kConfig), {{"x", 10}, {"y", 15}}, cpu_options());
    const float bias_before = net.get_parameter("bias:Out")[14];
    TrainOptions o;
    o.epochs = 3;
    o.batch = 8;
    o.optimizer.kind = OptimizerKind::kAdam;
    o.optimizer.learning_rate = 0.05f;
    Trainer trainer(net, {{"x", &x}, {"y", &y2}}, o);
    const double before = trainer.evaluate_loss();
    trainer.fit();
    EXPECT_LT(trainer.evaluate_loss(), before);
    EXPECT_EQ(net.get_parameter("bias:Out")[14], bias_before);
}

}  // namespace
}  // namespace sparsenet
