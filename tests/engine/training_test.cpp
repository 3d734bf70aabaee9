// End-to-end engine tests on the CPU backend: learning, determinism, save/load, exclusion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/host_rng.h"
#include "formulas/rng.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

GeneratedData planted(uint64_t users, uint32_t items, uint64_t nnz, double holdout) {
    GenerateOptions g;
    g.users = users;
    g.items = items;
    g.nnz = nnz;
    g.factors = 10;
    g.seed = 3;
    g.holdout = holdout;
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

TrainOptions adam(uint32_t epochs, uint64_t seed = 5) {
    TrainOptions t;
    t.epochs = epochs;
    t.batch = 64;
    t.seed = seed;
    t.optimizer.kind = OptimizerKind::kAdam;
    t.optimizer.learning_rate = 0.003f;
    return t;
}

TEST(Training, RecallBeatsPopularityOnPlantedData) {
    GeneratedData data = planted(1200, 400, 30000, 0.2);
    Fixture f(data.train);
    NetworkOptions no;
    no.device = "cpu";
    Network net = Network::create(f.config, f.widths(), no);
    Trainer trainer(net, f.data(), adam(8));
    const auto epochs = trainer.fit();
    ASSERT_EQ(epochs.size(), 8u);
    EXPECT_LT(epochs.back().loss, epochs.front().loss);

    Predictor predictor(net, {{"in", &f.in}});
    PredictOptions po;
    po.k = 20;
    const TopK top = predictor.top_k(po, &f.in);
    const RankingMetrics model = ranking_metrics(top, data.heldout, 20);
    const RankingMetrics popular = ranking_metrics(popularity_top_k(f.in, 20), data.heldout, 20);
    std::printf("Recall@20 model %.4f popularity %.4f\n", model.recall, popular.recall);
    EXPECT_GT(model.users, 1000u);
    EXPECT_GT(model.recall, 1.5 * popular.recall);
}

std::vector<std::vector<float>> all_parameters(const Network& net) {
    std::vector<std::vector<float>> values;
    for (const Parameter& p : net.parameters()) values.push_back(net.get_parameter(p.name));
    return values;
}

TEST(Training, SameSeedSameThreadsGivesIdenticalWeights) {
    GeneratedData data = planted(300, 120, 5000, 0.0);
    Fixture f(data.train);
    NetworkOptions no;
    no.device = "cpu";
    no.seed = 11;
    std::vector<std::vector<float>> runs[3];
    for (int run = 0; run < 3; ++run) {
        Network net = Network::create(f.config, f.widths(), no);
        Trainer trainer(net, f.data(), adam(2, run < 2 ? 5 : 6));
        trainer.fit();
        runs[run] = all_parameters(net);
    }
    EXPECT_EQ(runs[0], runs[1]);
    EXPECT_NE(runs[0], runs[2]);
}

// A matrix's initial weights are one stream of draws in row-major order (Network::create), drawn
// by chunks of 16 Mi values with each chunk's rows in parallel: the same values for any thread
// count. In -> H is 70,000 x 256 = 17.9 M values, two chunks.
TEST(Training, InitialWeightsAreOneStreamForAnyThreadCount) {
    const NetworkConfig config = NetworkConfig::from_json(
        R"({ "Layers": [ { "Name": "In", "N": 70000, "DataSet": "x", "Sparse": true },
                         { "Name": "H", "N": 256,
                           "WeightInit": { "Scheme": "Gaussian", "Scale": 0.05 } },
                         { "Name": "Out", "N": 3, "DataSet": "y" } ] })");
    const uint64_t seed = 17;
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(threads);
        NetworkOptions no;
        no.device = "cpu";
        no.seed = seed;
        no.threads = threads;
        Network net = Network::create(config, {{"x", 70000}, {"y", 3}}, no);
        std::vector<float> w = net.get_parameter("weight:In->H");
        ASSERT_EQ(w.size(), size_t(70000) * 256);
        if (threads == 1) {
            // The stream itself: edge 0's seed, two draws per Gaussian value, the scale a float.
            engine::HostRng rng(formulas::derive_seed(seed, 0, 0x5EED));
            for (size_t i = 0; i < w.size(); ++i)
                ASSERT_EQ(w[i], float(double(0.05f) * rng.normal())) << "value " << i;
            first = std::move(w);
        } else {
            ASSERT_TRUE(w == first);
        }
    }
}

TEST(Training, SaveLoadPredictGivesIdenticalScores) {
    GeneratedData data = planted(200, 90, 3000, 0.0);
    Fixture f(data.train);
    NetworkOptions no;
    no.device = "cpu";
    Network net = Network::create(f.config, f.widths(), no);
    Trainer trainer(net, f.data(), adam(1));
    trainer.fit();
    testing::TempDir dir;
    const std::string path = dir.file("model.nc");
    net.save(path);
    Network loaded = Network::load(path, no);
    EXPECT_EQ(loaded.config(), net.config());
    EXPECT_EQ(all_parameters(loaded), all_parameters(net));
    Predictor a(net, {{"in", &f.in}});
    Predictor b(loaded, {{"in", &f.in}});
    const std::vector<float> sa = a.scores(0, 200), sb = b.scores(0, 200);
    ASSERT_EQ(sa.size(), 200u * 90u);
    EXPECT_EQ(sa, sb);
}

TEST(Training, PredictNeverReturnsExcludedItems) {
    GeneratedData data = planted(150, 60, 2500, 0.0);
    Fixture f(data.train);
    NetworkOptions no;
    no.device = "cpu";
    Network net = Network::create(f.config, f.widths(), no);
    Predictor predictor(net, {{"in", &f.in}});
    for (uint32_t k : {1u, 10u, 60u, 100u}) {
        PredictOptions po;
        po.k = k;
        po.batch = 32;
        const TopK top = predictor.top_k(po, &f.in);
        for (uint64_t r = 0; r < top.rows; ++r) {
            const auto first = f.in.indices.begin() + f.in.offsets[r];
            const auto last = f.in.indices.begin() + f.in.offsets[r + 1];
            const uint64_t available = 60 - f.in.row_length(r);
            uint64_t returned = 0;
            for (uint32_t i = 0; i < k; ++i) {
                const uint32_t item = top.indices[r * k + i];
                if (item == std::numeric_limits<uint32_t>::max()) continue;
                ++returned;
                ASSERT_FALSE(std::binary_search(first, last, item))
                    << "row " << r << " got its own item " << item << " at k=" << k;
                if (i > 0) {
                    EXPECT_GE(top.scores[r * k + i - 1], top.scores[r * k + i]);
                }
            }
            EXPECT_EQ(returned, std::min<uint64_t>(k, available)) << "row " << r;
        }
    }
}

TEST(Training, WrongDatasetsAreRejectedBeforeTraining) {
    GeneratedData data = planted(100, 50, 1000, 0.0);
    Fixture f(data.train);
    NetworkOptions no;
    no.device = "cpu";
    try {
        Network::create(f.config, {{"in", 50}}, no);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kData);
        EXPECT_NE(std::string(e.what()).find("'out'"), std::string::npos) << e.what();
    }
    Network net = Network::create(f.config, f.widths(), no);
    Dataset fewer = testing::random_dataset(99, 50, testing::RowShape::kUniform, false, 1, "out");
    try {
        Trainer trainer(net, {{"in", &f.in}, {"out", &fewer}}, adam(1));
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kData);
        EXPECT_NE(std::string(e.what()).find("rows"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace sparsenet

namespace sparsenet {
namespace {

// Network::device_free_memory: the network's own backend's figure (the CPU's MemAvailable), the
// same quantity free_memory_for reads through a backend of its own (predict sizes its GPU batch
// by it without starting a second device context). MemAvailable moves between the two reads.
TEST(Network, DeviceFreeMemoryIsTheBackendsFigure) {
    const Fixture f(planted(50, 40, 400, 0.0).train);
    NetworkOptions no;
    no.device = "cpu";
    const Network net = Network::create(f.config, f.widths(), no);
    const uint64_t own = net.device_free_memory();
    const uint64_t separate = free_memory_for("cpu", 1, nullptr, nullptr);
    EXPECT_GT(own, 0u);
    EXPECT_GT(double(own), 0.5 * double(separate));
    EXPECT_LT(double(own), 2.0 * double(separate));
}

}  // namespace
}  // namespace sparsenet
