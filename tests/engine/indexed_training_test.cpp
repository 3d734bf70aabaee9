// Indexed and weighted datasets in the engine: an indexed dataset is bound as its expanded copy,
// so it trains and predicts exactly like that copy; weights on inputs are ignored and weights on
// outputs scale each example's loss (example_weights_test.cpp checks them in detail).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"
#include "test_configs.h"

namespace sparsenet {
namespace {

// tests/data/configs/indexed_autoencoder.json: a small denoising autoencoder.
const char* const kAutoencoder = kIndexedAutoencoderJson;

// 150 stored rows; 400 examples that reuse them (some rows many times, some never).
Dataset indexed_data(const std::string& name) {
    GenerateOptions g;
    g.users = 150;
    g.items = 70;
    g.nnz = 2500;
    g.seed = 9;
    Dataset d = generate(g).train;
    d.name = name;
    for (uint32_t e = 0; e < 400; ++e) d.example_rows.push_back((e * e + 3 * e) % 140);
    d.validate("indexed_data");
    return d;
}

Dataset renamed(Dataset d, const std::string& name) {
    d.name = name;
    return d;
}

std::vector<std::vector<float>> all_parameters(const Network& net) {
    std::vector<std::vector<float>> values;
    for (const Parameter& p : net.parameters()) values.push_back(net.get_parameter(p.name));
    return values;
}

TrainOptions options() {
    TrainOptions t;
    t.epochs = 2;
    t.batch = 32;
    t.seed = 21;
    t.optimizer.kind = OptimizerKind::kAdam;
    t.optimizer.learning_rate = 0.01f;
    return t;
}

NetworkOptions cpu() {
    NetworkOptions no;
    no.device = "cpu";
    no.seed = 4;
    return no;
}

struct Outcome {
    std::vector<std::vector<float>> parameters;
    std::vector<EpochStats> epochs;
    std::vector<float> scores;
    TopK top;
};

// Trains on (in, out), then scores and ranks every example (excluding `in`'s items).
Outcome train_and_predict(const Dataset& in, const Dataset& out) {
    const NetworkConfig config = NetworkConfig::from_json(kAutoencoder);
    Network net = Network::create(config, {{"in", in.cols}, {"out", out.cols}}, cpu());
    Outcome run;
    Trainer trainer(net, {{"in", &in}, {"out", &out}}, options());
    run.epochs = trainer.fit();
    run.parameters = all_parameters(net);
    Predictor predictor(net, {{"in", &in}});
    EXPECT_EQ(predictor.rows(), in.examples());
    run.scores = predictor.scores(0, static_cast<uint32_t>(in.examples()));
    PredictOptions po;
    po.k = 5;
    po.batch = 64;
    run.top = predictor.top_k(po, &in);
    return run;
}

TEST(IndexedTraining, TrainsAndPredictsLikeItsExpandedCopy) {
    const Dataset in = indexed_data("in");
    const Dataset out = renamed(in, "out");
    ASSERT_EQ(in.examples(), 400u);
    ASSERT_EQ(in.rows, 150u);
    const Dataset in_plain = in.expanded();
    const Dataset out_plain = renamed(in_plain, "out");
    ASSERT_FALSE(in_plain.is_indexed());

    const Outcome indexed = train_and_predict(in, out);
    const Outcome plain = train_and_predict(in_plain, out_plain);
    ASSERT_EQ(indexed.epochs.size(), 2u);
    EXPECT_EQ(indexed.epochs[0].examples, 400u);  // every example, not the 150 stored rows
    EXPECT_EQ(indexed.epochs[1].loss, plain.epochs[1].loss);
    EXPECT_EQ(indexed.parameters, plain.parameters);
    EXPECT_EQ(indexed.scores.size(), 400u * 70u);
    EXPECT_EQ(indexed.scores, plain.scores);
    EXPECT_EQ(indexed.top.rows, 400u);
    EXPECT_EQ(indexed.top.indices, plain.top.indices);
    EXPECT_EQ(indexed.top.scores, plain.top.scores);

    // The metrics expand an indexed held-out set and an indexed popularity input too.
    const RankingMetrics a = ranking_metrics(indexed.top, in, 5);
    const RankingMetrics b = ranking_metrics(plain.top, in_plain, 5);
    EXPECT_EQ(a.users, b.users);
    EXPECT_EQ(a.recall, b.recall);
    const TopK pa = popularity_top_k(in, 5), pb = popularity_top_k(in_plain, 5);
    EXPECT_EQ(pa.rows, 400u);
    EXPECT_EQ(pa.indices, pb.indices);
    EXPECT_EQ(pa.scores, pb.scores);
}

TEST(IndexedTraining, ExampleCountsMustAgree) {
    const Dataset in = indexed_data("in");                             // 400 examples
    const Dataset out = renamed(indexed_data("x").expanded(), "out");  // 400 rows: fine
    Dataset few = renamed(indexed_data("x"), "out");
    few.example_rows.clear();  // the 150 stored rows only
    const NetworkConfig config = NetworkConfig::from_json(kAutoencoder);
    Network net = Network::create(config, {{"in", in.cols}, {"out", out.cols}}, cpu());
    Trainer ok(net, {{"in", &in}, {"out", &out}}, options());
    try {
        Trainer trainer(net, {{"in", &in}, {"out", &few}}, options());
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kData);
        EXPECT_NE(std::string(e.what()).find("400 and 150"), std::string::npos) << e.what();
    }
}

TEST(WeightedTraining, OutputWeightsScaleTheLossInputWeightsAreIgnored) {
    const Dataset in = indexed_data("in").expanded();
    Dataset weighted_out = renamed(in, "out");
    weighted_out.weights.assign(weighted_out.examples(), 2.0f);
    const Dataset plain_out = renamed(in, "out");
    const NetworkConfig config = NetworkConfig::from_json(kAutoencoder);
    Network net = Network::create(config, {{"in", in.cols}, {"out", in.cols}}, cpu());
    // Every example weighted 2: every loss doubles exactly (x2 is exact in floating point).
    Trainer weighted(net, {{"in", &in}, {"out", &weighted_out}}, options());
    Trainer plain(net, {{"in", &in}, {"out", &plain_out}}, options());
    const double plain_loss = plain.evaluate_loss();
    EXPECT_GT(plain_loss, 0.0);
    EXPECT_EQ(weighted.evaluate_loss(), 2.0 * plain_loss);
    // An indexed weighted output (weights per example, rows shared) trains like its expansion.
    Dataset indexed_out = renamed(indexed_data("x"), "out");
    for (uint64_t e = 0; e < indexed_out.examples(); ++e)
        indexed_out.weights.push_back(0.5f + float(e % 3));
    const Outcome a = train_and_predict(in, indexed_out);
    const Outcome b = train_and_predict(in, indexed_out.expanded());
    EXPECT_EQ(a.parameters, b.parameters);

    // Weights on the input change nothing: same parameters as without them.
    Dataset weighted_in = in;
    for (uint64_t e = 0; e < in.examples(); ++e) weighted_in.weights.push_back(float(e % 5));
    const Outcome with = train_and_predict(weighted_in, renamed(in, "out"));
    const Outcome without = train_and_predict(in, renamed(in, "out"));
    EXPECT_EQ(with.parameters, without.parameters);
}

}  // namespace
}  // namespace sparsenet
