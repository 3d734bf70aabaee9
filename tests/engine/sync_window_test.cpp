// The trainer's windowed guard (src/engine/trainer.cpp): on a device backend the host looks at
// the finite-value guard, the loss and the ranks' decisions once per 16 batches instead of after
// every batch (two full synchronisations per step before). SPARSENET_SYNC_EVERY_BATCHES=N runs
// that path on the CPU backend, which otherwise keeps looking after every batch. It must not
// change what training computes, must report every batch to on_batch with its own loss, and must
// still name the epoch and the first non-finite batch exactly, and the layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::contains;

constexpr uint32_t kItems = 60;

const char* kNet = R"({"Kind": "FeedForward", "Name": "window",
  "ErrorFunction": "CrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 12, "Activation": "Relu"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "Sigmoid"}
  ]})";

struct Data {
    Dataset in, out;
    Data() {
        GenerateOptions g;
        g.users = 400;
        g.items = kItems;
        g.nnz = 400 * 9;
        g.seed = 8;
        in = generate(g).train;
        out = in;
        in.name = "in";
        out.name = "out";
    }
    std::map<std::string, const Dataset*> map() const { return {{"in", &in}, {"out", &out}}; }
};

Network fresh() {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 99;
    return Network::create(NetworkConfig::from_json(kNet), {{"in", kItems}, {"out", kItems}}, o);
}

// Sets SPARSENET_SYNC_EVERY_BATCHES for the lifetime of the object (read when a Trainer is made).
struct SyncEvery {
    explicit SyncEvery(const char* n) { setenv("SPARSENET_SYNC_EVERY_BATCHES", n, 1); }
    ~SyncEvery() { unsetenv("SPARSENET_SYNC_EVERY_BATCHES"); }
};

struct TrainRun {
    std::vector<EpochStats> epochs;
    std::vector<BatchProgress> batches;
    std::vector<float> weights;
    std::string error;
};

TrainRun train(const char* every, float learning_rate) {
    const Data data;
    Network net = fresh();
    TrainOptions o;
    o.epochs = 2;
    o.batch = 32;  // 13 batches per epoch, the last one short: windows of 4 end at 4, 8, 12, 13
    o.seed = 5;
    o.optimizer.kind = OptimizerKind::kSgd;
    o.optimizer.learning_rate = learning_rate;
    TrainRun r;
    o.on_batch = [&](const BatchProgress& p) { r.batches.push_back(p); };
    SyncEvery env(every);
    try {
        Trainer t(net, data.map(), o);
        r.epochs = t.fit();
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kNumeric) << e.what();
        r.error = e.what();
    }
    r.weights = net.get_parameter("weight:Hidden->Output");
    return r;
}

TEST(SyncWindow, TrainsExactlyAsTheBatchByBatchGuard) {
    const TrainRun each = train("1", 0.2f), windowed = train("4", 0.2f);
    ASSERT_TRUE(each.error.empty()) << each.error;
    ASSERT_TRUE(windowed.error.empty()) << windowed.error;
    ASSERT_EQ(each.epochs.size(), 2u);
    ASSERT_EQ(windowed.epochs.size(), 2u);
    for (size_t e = 0; e < 2; ++e) EXPECT_EQ(each.epochs[e].loss, windowed.epochs[e].loss);
    EXPECT_EQ(each.weights, windowed.weights);
    // Every batch reaches on_batch, in order, with its own loss (delivered per window).
    ASSERT_EQ(windowed.batches.size(), 26u);
    ASSERT_EQ(each.batches.size(), 26u);
    for (size_t i = 0; i < 26; ++i) {
        EXPECT_EQ(windowed.batches[i].epoch, each.batches[i].epoch);
        EXPECT_EQ(windowed.batches[i].batch, each.batches[i].batch);
        EXPECT_EQ(windowed.batches[i].examples, each.batches[i].examples);
        EXPECT_EQ(windowed.batches[i].loss, each.batches[i].loss) << i;
    }
}

TEST(SyncWindow, NamesTheFirstNonFiniteBatchAndTheLayer) {
    // An exploding learning rate: the batch-by-batch guard stops before the update of the first
    // non-finite batch; the windowed one finds that same batch in the window's flags.
    const TrainRun each = train("1", 1e30f), windowed = train("5", 1e30f);
    ASSERT_FALSE(each.error.empty());
    ASSERT_FALSE(windowed.error.empty());
    const std::string head =
        each.error.substr(0, each.error.find(':'));  // "...epoch E, batch B of N"
    EXPECT_TRUE(contains(head, "training diverged at epoch 1, batch ")) << each.error;
    EXPECT_EQ(windowed.error.substr(0, windowed.error.find(':')), head)
        << "batch by batch: " << each.error << "\nwindowed: " << windowed.error;
    EXPECT_TRUE(contains(windowed.error, "found after batch ")) << windowed.error;
    EXPECT_TRUE(contains(windowed.error, "checked every 5 batches")) << windowed.error;
    EXPECT_TRUE(contains(windowed.error, "No checkpoint was written")) << windowed.error;
    // The batches before the bad one were reported; none from it on.
    const std::string number = head.substr(head.rfind("batch ") + 6);
    const uint64_t bad = std::stoull(number.substr(0, number.find(' ')));
    EXPECT_EQ(windowed.batches.size(), 0u)
        << "the window holding batch " << bad << " is not reported";
    std::printf("batch by batch: %s\nwindowed: %s\n", each.error.c_str(), windowed.error.c_str());
}

// A NaN in the weights into Output, set between batches 4 and 5 (at the end of the first window
// of 4): both guards stop at batch 5; the windowed one names the layer from the NaN in its
// activations of that batch.
TEST(SyncWindow, NamesTheLayerOfANaN) {
    std::string messages[2];
    const char* every[2] = {"1", "4"};
    for (int i = 0; i < 2; ++i) {
        const Data data;
        Network net = fresh();
        TrainOptions o;
        o.epochs = 1;
        o.batch = 32;
        o.seed = 5;
        o.optimizer.learning_rate = 0.1f;
        o.on_batch = [&](const BatchProgress& p) {
            if (p.batch != 4) return;
            std::vector<float> w = net.get_parameter("weight:Hidden->Output");
            w[7] = std::nanf("");
            net.set_parameter("weight:Hidden->Output", w);
        };
        SyncEvery env(every[i]);
        Trainer t(net, data.map(), o);
        messages[i] = testing::expect_error([&] { t.fit(); }, ErrorCategory::kNumeric);
        EXPECT_TRUE(contains(messages[i], "training diverged at epoch 1, batch 5 of 13: "))
            << messages[i];
    }
    EXPECT_TRUE(contains(messages[0], "weights into layer 'Output'")) << messages[0];
    EXPECT_TRUE(contains(messages[1],
                         "the first NaN values of that batch are in the activations "
                         "of layer 'Output'"))
        << messages[1];
}

TEST(SyncWindow, RefusesABadSetting) {
    SyncEvery env("0");
    const Data data;
    Network net = fresh();
    EXPECT_TRUE(contains(testing::expect_error([&] { Trainer t(net, data.map(), TrainOptions{}); },
                                               ErrorCategory::kUsage),
                         "SPARSENET_SYNC_EVERY_BATCHES='0'"));
}

}  // namespace
}  // namespace sparsenet
