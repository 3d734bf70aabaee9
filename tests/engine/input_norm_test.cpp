// "Normalize" on an Input layer (docs/config-reference.md, $.Layers[].Normalize): a network
// with the key trains, predicts and serves exactly as the same network without it fed input rows
// scaled to the L2 norm beforehand (computed here independently), Denoising dropping entries of
// the scaled rows. The model-parallel case (norm of the whole row from column bands) is in
// tests/mpi/mpi_model_parallel_test.cpp (kSoftmax).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/input_norm.h"
#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/recommender.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

constexpr float kScale = 2.5f;

std::string config_json(bool normalize) {
    const std::string norm =
        normalize ? R"(, "Normalize": {"Norm": "L2", "Scale": 2.5})" : std::string();
    return R"({"Name": "n", "Kind": "AutoEncoder", "ErrorFunction": "CrossEntropy",
      "Denoising": {"p": 0.3}, "ShuffleIndices": true,
      "Layers": [
        {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true)" +
           norm + R"(},
        {"Name": "H", "Kind": "Hidden", "N": 9, "Activation": "Tanh"},
        {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "SoftMax",
         "Sparse": true}]})";
}

// Row r scaled to norm kScale, by a loop of its own (double sums, one rounding to float).
Dataset scaled_by_hand(const Dataset& d) {
    Dataset s = d;
    s.values.resize(d.nnz());
    for (uint64_t r = 0; r < d.rows; ++r) {
        double sq = 0.0;
        for (uint64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e) {
            const double v = d.is_boolean() ? 1.0 : d.values[e];
            sq += v * v;
        }
        for (uint64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e) {
            const double v = d.is_boolean() ? 1.0 : d.values[e];
            s.values[e] = sq > 0.0 ? float(v * kScale / std::sqrt(sq)) : float(v);
        }
    }
    return s;
}

NetworkOptions cpu_options() {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 5;
    return o;
}

TrainOptions adamw() {
    TrainOptions t;
    t.epochs = 3;
    t.batch = 16;
    t.seed = 9;
    t.optimizer.kind = OptimizerKind::kAdamW;
    t.optimizer.learning_rate = 0.01f;
    return t;
}

TEST(NormalizeRows, ScalesEachRowToTheNorm) {
    Dataset d;
    d.name = "x";
    d.cols = 6;
    d.rows = 3;
    d.offsets = {0, 4, 4, 5};  // 4 items, an empty row, 1 item
    d.indices = {0, 2, 3, 5, 1};
    Dataset b = d;
    engine::normalize_rows(b, engine::row_square_sums(b), 3.0f);
    ASSERT_EQ(b.values.size(), 5u);                                  // boolean rows became valued
    for (int e = 0; e < 4; ++e) EXPECT_FLOAT_EQ(b.values[e], 1.5f);  // 3 / sqrt(4)
    EXPECT_FLOAT_EQ(b.values[4], 3.0f);

    d.values = {3.0f, 0.0f, -4.0f, 0.0f, 0.0f};  // norm 5; a row of zeros stays zero
    const std::vector<double> sq = engine::row_square_sums(d);
    EXPECT_EQ(sq, (std::vector<double>{25.0, 0.0, 0.0}));
    engine::normalize_rows(d, sq, 1.0f);
    EXPECT_EQ(d.values, (std::vector<float>{0.6f, 0.0f, -0.8f, 0.0f, 0.0f}));

    // A column band scaled by the whole row's squares (what each rank does under a split).
    Dataset band;
    band.name = "x";
    band.cols = 6;
    band.rows = 1;
    band.offsets = {0, 1};
    band.indices = {5};
    engine::normalize_rows(band, {16.0}, 2.0f);
    EXPECT_EQ(band.values, (std::vector<float>{0.5f}));
}

class InputNormalize : public ::testing::TestWithParam<bool> {};  // valued input or not

TEST_P(InputNormalize, TrainsAndPredictsAsTheRowsScaledBeforehand) {
    const bool valued = GetParam();
    Dataset in = testing::random_dataset(60, 23, testing::RowShape::kPowerLaw, valued, 3, "in");
    Dataset out = testing::random_dataset(60, 23, testing::RowShape::kPowerLaw, false, 3, "out");
    const Dataset scaled = scaled_by_hand(in);
    const std::map<std::string, uint32_t> widths{{"in", 23}, {"out", 23}};

    Network normalized =
        Network::create(NetworkConfig::from_json(config_json(true)), widths, cpu_options());
    Network plain =
        Network::create(NetworkConfig::from_json(config_json(false)), widths, cpu_options());
    Trainer a(normalized, {{"in", &in}, {"out", &out}}, adamw());
    Trainer b(plain, {{"in", &scaled}, {"out", &out}}, adamw());
    const auto la = a.fit();
    const auto lb = b.fit();
    ASSERT_EQ(la.size(), lb.size());
    for (size_t e = 0; e < la.size(); ++e) EXPECT_NEAR(la[e].loss, lb[e].loss, 1e-6) << e;
    EXPECT_LT(la.back().loss, la.front().loss);
    for (const Parameter& p : plain.parameters()) {
        const std::vector<float> x = normalized.get_parameter(p.name);
        const std::vector<float> y = plain.get_parameter(p.name);
        ASSERT_EQ(x.size(), y.size());
        for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-6) << p.name << " " << i;
    }
    // Without the key the same data trains differently (the test is not vacuous).
    Network raw =
        Network::create(NetworkConfig::from_json(config_json(false)), widths, cpu_options());
    Trainer c(raw, {{"in", &in}, {"out", &out}}, adamw());
    EXPECT_GT(std::abs(c.fit().back().loss - la.back().loss), 1e-4);

    Predictor pa(normalized, {{"in", &in}});
    Predictor pb(plain, {{"in", &scaled}});
    const std::vector<float> sa = pa.scores(0, 60);
    const std::vector<float> sb = pb.scores(0, 60);
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) ASSERT_NEAR(sa[i], sb[i], 1e-6) << i;
}

INSTANTIATE_TEST_SUITE_P(BooleanAndValued, InputNormalize, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "valued" : "boolean"; });

TEST(InputNormalizeModel, SavedModelsAndTheRecommenderNormaliseQueries) {
    const Dataset in =
        testing::random_dataset(40, 30, testing::RowShape::kPowerLaw, false, 8, "in");
    Dataset out = in;
    out.name = "out";
    Network net = Network::create(NetworkConfig::from_json(config_json(true)),
                                  {{"in", 30}, {"out", 30}}, cpu_options());
    Trainer(net, {{"in", &in}, {"out", &out}}, adamw()).fit();
    testing::TempDir dir;
    const std::string model = dir.file("model.nc");
    net.save(model);
    Network loaded = Network::load(model);
    EXPECT_EQ(loaded.config().layers[0].normalize_l2, kScale);

    Predictor predictor(loaded, {{"in", &in}});
    const Recommender rec(model);
    for (uint64_t r = 0; r < in.rows; r += 7) {
        const std::vector<float> s = predictor.scores(r, 1);
        std::vector<ItemRef> items;
        for (uint64_t e = in.offsets[r]; e < in.offsets[r + 1]; ++e) {
            items.emplace_back(int64_t(in.indices[e]));
        }
        RecommendOptions o;
        o.k = 5;
        o.exclude_inputs = false;
        const Recommendations got = rec.recommend(items, o);
        ASSERT_EQ(got.items.size(), 5u);
        for (const Recommendation& x : got.items) {
            EXPECT_NEAR(x.score, s[x.id], 1e-6) << "row " << r << " item " << x.id;
        }
    }
}

}  // namespace
}  // namespace sparsenet
