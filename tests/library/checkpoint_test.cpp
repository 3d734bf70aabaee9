// Checkpoints and the numerical guard (Trainer::save_checkpoint / resume, TrainOptions
// checkpoint*, check_finite): a resumed run ends with the uninterrupted run's weights bit for
// bit, at an epoch boundary or inside an epoch, for optimizers with 0, 1 and 2 state slots; a
// checkpoint is a loadable model; a resume with other options is refused by name; a NaN or an
// infinity stops training with the epoch, batch and layer, and the last good checkpoint stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/model_file.h"
#include "library/library_test_util.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

constexpr uint32_t kItems = 90;

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

// Dropout on the hidden layer, so the random masks must resume too.
NetworkConfig config() {
    return NetworkConfig::from_json(R"({
      "Version": 0.9, "Name": "checkpoint-test", "Kind": "AutoEncoder",
      "ErrorFunction": "CrossEntropy", "ShuffleIndices": true,
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 24, "Activation": "Relu", "pDropout": 0.2},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid"}
      ]})");
}

Network fresh_network() {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 99;
    return Network::create(config(), {{"in", kItems}, {"out", kItems}}, o);
}

Network load(const std::string& path) {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    return Network::load(path, o);
}

TrainOptions options(OptimizerKind kind, uint32_t epochs) {
    TrainOptions t;
    t.epochs = epochs;
    t.batch = 32;  // 13 batches per epoch, the last one short
    t.optimizer.kind = kind;
    t.optimizer.learning_rate = kind == OptimizerKind::kSgd ? 0.2f : 0.01f;
    t.decay = 0.01f;
    t.seed = 5;
    return t;
}

std::vector<float> all_parameters(const Network& net) {
    std::vector<float> all;
    for (const Parameter& p : net.parameters()) {
        const std::vector<float> v = net.get_parameter(p.name);
        all.insert(all.end(), v.begin(), v.end());
    }
    return all;
}

// Bit-for-bit equality (EXPECT_EQ on floats would also accept -0 == +0).
bool identical(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Resume : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(Resume, FromAnEpochBoundaryMatchesTheUninterruptedRun) {
    const Data data;
    testing::TempDir dir;
    Network straight = fresh_network();
    std::vector<EpochStats> expected;
    {
        Trainer t(straight, data.map(), options(GetParam(), 5));
        expected = t.fit();
    }
    // Two epochs with a checkpoint after each, then a new process's view: load and resume.
    Network first = fresh_network();
    TrainOptions o = options(GetParam(), 2);
    o.checkpoint = dir.file("ck");
    o.checkpoint_every = 1;
    std::vector<CheckpointInfo> written;
    o.on_checkpoint = [&](const CheckpointInfo& c) { written.push_back(c); };
    {
        Trainer t(first, data.map(), o);
        t.fit();
    }
    ASSERT_EQ(written.size(), 2u);
    EXPECT_EQ(written[1].epochs_complete, 2u);
    EXPECT_EQ(written[1].batches_done, 0u);
    // The checkpoint is a model: Network::load reads the parameters of that moment.
    Network resumed = load(dir.file("ck"));
    EXPECT_TRUE(identical(all_parameters(resumed), all_parameters(first)));
    Trainer t(resumed, data.map(), options(GetParam(), 5));
    t.resume(dir.file("ck"));
    EXPECT_EQ(t.epochs_complete(), 2u);
    const std::vector<EpochStats> rest = t.fit();
    ASSERT_EQ(rest.size(), 3u);
    EXPECT_EQ(rest[0].epoch, 3u);
    EXPECT_EQ(rest[2].loss, expected[4].loss);
    EXPECT_TRUE(identical(all_parameters(resumed), all_parameters(straight)));
}

TEST_P(Resume, FromInsideAnEpochMatchesTheUninterruptedRun) {
    const Data data;
    testing::TempDir dir;
    Network straight = fresh_network();
    std::vector<EpochStats> expected;
    {
        Trainer t(straight, data.map(), options(GetParam(), 3));
        expected = t.fit();
    }
    // Stopped after batch 5 of epoch 2, checkpointed there.
    Network first = fresh_network();
    TrainOptions o = options(GetParam(), 3);
    Trainer* self = nullptr;
    o.on_batch = [&](const BatchProgress& p) {
        if (p.epoch == 2 && p.batch == 5) self->cancel();
    };
    {
        Trainer t(first, data.map(), o);
        self = &t;
        const std::vector<EpochStats> ran = t.fit();
        ASSERT_EQ(ran.size(), 2u);
        EXPECT_FALSE(ran[1].complete);
        t.save_checkpoint(dir.file("ck"));
    }
    const io::ModelFile file = io::read_model(dir.file("ck"), true);
    ASSERT_TRUE(file.training.has_value());
    EXPECT_EQ(file.training->epochs_complete, 1u);
    EXPECT_EQ(file.training->batches_done, 5u);
    EXPECT_EQ(file.training->optimizer, to_string(GetParam()));
    EXPECT_EQ(file.training->optimizer_steps, 13u + 5u);
    const int slots = optimizer_state_slots(GetParam());
    EXPECT_EQ(file.weights[0].state1.empty(), slots < 1);
    EXPECT_EQ(file.weights[0].state2.empty(), slots < 2);

    Network resumed = load(dir.file("ck"));
    Trainer t(resumed, data.map(), options(GetParam(), 3));
    t.resume(dir.file("ck"));
    EXPECT_EQ(t.epochs_complete(), 1u);
    const std::vector<EpochStats> rest = t.fit();
    ASSERT_EQ(rest.size(), 2u);  // the rest of epoch 2, then epoch 3
    EXPECT_EQ(rest[0].epoch, 2u);
    EXPECT_EQ(rest[0].batches, 13u);
    EXPECT_EQ(rest[0].loss, expected[1].loss);  // the epoch's loss includes the first 5 batches
    EXPECT_EQ(rest[1].loss, expected[2].loss);
    EXPECT_TRUE(identical(all_parameters(resumed), all_parameters(straight)));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, Resume,
                         ::testing::Values(OptimizerKind::kSgd, OptimizerKind::kMomentum,
                                           OptimizerKind::kAdam),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Checkpoint, TimedCheckpointsFollowEveryBatchAndEachResumesExactly) {
    const Data data;
    testing::TempDir dir;
    Network straight = fresh_network();
    {
        Trainer t(straight, data.map(), options(OptimizerKind::kAdam, 2));
        t.fit();
    }
    // checkpoint_seconds below any batch's time: one checkpoint after every batch.
    Network net = fresh_network();
    TrainOptions o = options(OptimizerKind::kAdam, 2);
    o.checkpoint = dir.file("ck");
    o.checkpoint_seconds = 1e-9;
    std::vector<CheckpointInfo> written;
    std::vector<std::string> copies;
    o.on_checkpoint = [&](const CheckpointInfo& c) {
        written.push_back(c);
        copies.push_back(dir.file("copy" + std::to_string(copies.size())));
        std::filesystem::copy_file(c.path, copies.back());
    };
    Trainer(net, data.map(), o).fit();
    // Writing checkpoints changes nothing in the training.
    EXPECT_TRUE(identical(all_parameters(net), all_parameters(straight)));
    ASSERT_EQ(written.size(), 26u);
    EXPECT_EQ(written[4].epochs_complete, 0u);
    EXPECT_EQ(written[4].batches_done, 5u);
    EXPECT_EQ(written[12].epochs_complete, 1u);  // the epoch's last batch: a boundary
    EXPECT_EQ(written[12].batches_done, 0u);
    EXPECT_EQ(written[13].batches_done, 1u);
    // Resuming from a few of them, each ends where the uninterrupted run ends.
    for (size_t i : {size_t(0), size_t(7), size_t(12), size_t(20)}) {
        Network resumed = load(copies[i]);
        Trainer t(resumed, data.map(), options(OptimizerKind::kAdam, 2));
        t.resume(copies[i]);
        t.fit();
        EXPECT_TRUE(identical(all_parameters(resumed), all_parameters(straight))) << i;
    }
    // A finished run's checkpoint resumes to nothing more to do.
    Network done = load(copies.back());
    Trainer t(done, data.map(), options(OptimizerKind::kAdam, 2));
    t.resume(copies.back());
    EXPECT_TRUE(t.fit().empty());
}

TEST(Checkpoint, NotesTravelWithTheCheckpoint) {
    const Data data;
    testing::TempDir dir;
    Network net = fresh_network();
    TrainOptions o = options(OptimizerKind::kSgd, 1);
    o.checkpoint = dir.file("ck");
    o.checkpoint_every = 1;
    o.checkpoint_notes = [] {
        return std::map<std::string, std::string>{{"best_epoch", "1"}, {"owner", "svc 7"}};
    };
    Trainer(net, data.map(), o).fit();
    Network again = load(dir.file("ck"));
    Trainer t(again, data.map(), options(OptimizerKind::kSgd, 1));
    const auto notes = t.resume(dir.file("ck"));
    EXPECT_EQ(notes.at("best_epoch"), "1");
    EXPECT_EQ(notes.at("owner"), "svc 7");

    o.checkpoint_notes = [] { return std::map<std::string, std::string>{{"bad key", "x"}}; };
    Network other = fresh_network();
    Trainer bad(other, data.map(), o);
    EXPECT_TRUE(testing::contains(testing::expect_error([&] { bad.fit(); }, ErrorCategory::kUsage),
                                  "bad key"));
}

TEST(Checkpoint, ResumeRefusesOtherOptionsByName) {
    const Data data;
    testing::TempDir dir;
    Network net = fresh_network();
    TrainOptions o = options(OptimizerKind::kAdam, 1);
    o.checkpoint = dir.file("ck");
    o.checkpoint_every = 1;
    Trainer(net, data.map(), o).fit();

    auto refused = [&](TrainOptions changed, const std::string& name) {
        Network again = load(dir.file("ck"));
        Trainer t(again, data.map(), changed);
        const std::string message =
            testing::expect_error([&] { t.resume(dir.file("ck")); }, ErrorCategory::kUsage);
        EXPECT_TRUE(testing::contains(message, "written with " + name + " = ")) << message;
    };
    TrainOptions c = options(OptimizerKind::kAdam, 1);
    c.batch = 16;
    refused(c, "batch");
    c = options(OptimizerKind::kAdam, 1);
    c.seed = 6;
    refused(c, "seed");
    refused(options(OptimizerKind::kMomentum, 1), "optimizer");
    c = options(OptimizerKind::kAdam, 1);
    c.optimizer.learning_rate = 0.02f;
    refused(c, "learning_rate");
    c = options(OptimizerKind::kAdam, 1);
    c.shuffle = false;
    refused(c, "shuffle");
    c = options(OptimizerKind::kAdam, 1);
    c.decay = 0.0f;
    refused(c, "decay");
    // More epochs is what resuming is for.
    Network again = load(dir.file("ck"));
    Trainer more(again, data.map(), options(OptimizerKind::kAdam, 3));
    more.resume(dir.file("ck"));
    EXPECT_EQ(more.fit().size(), 2u);

    // Another network's config, and a plain model file.
    NetworkOptions no;
    no.device = "cpu";
    Network wider =
        Network::create(testing::autoencoder_config(8), {{"in", kItems}, {"out", kItems}}, no);
    Trainer w(wider, data.map(), options(OptimizerKind::kAdam, 1));
    EXPECT_TRUE(testing::contains(
        testing::expect_error([&] { w.resume(dir.file("ck")); }, ErrorCategory::kUsage),
        "config differs"));
    net.save(dir.file("model"));
    Network plain = load(dir.file("model"));
    Trainer p(plain, data.map(), options(OptimizerKind::kAdam, 1));
    EXPECT_TRUE(testing::contains(
        testing::expect_error([&] { p.resume(dir.file("model")); }, ErrorCategory::kIo),
        "not a checkpoint"));
}

// A parameter turned NaN (as a diverging update would) stops training at the next batch, naming
// the epoch, the batch and the layer; the checkpoint on disk stays the last good one.
TEST(NumericalGuard, NanWeightsStopTrainingAndKeepTheLastGoodCheckpoint) {
    const Data data;
    testing::TempDir dir;
    Network net = fresh_network();
    TrainOptions o = options(OptimizerKind::kAdam, 4);
    o.checkpoint = dir.file("ck");
    o.checkpoint_every = 1;
    o.on_batch = [&](const BatchProgress& p) {
        if (p.epoch == 2 && p.batch == 3) {
            std::vector<float> w = net.get_parameter("weight:Hidden->Output");
            w[17] = std::numeric_limits<float>::quiet_NaN();
            net.set_parameter("weight:Hidden->Output", w);
        }
    };
    std::vector<uint32_t> epochs;
    o.on_epoch = [&](const EpochStats& s) { epochs.push_back(s.epoch); };
    Trainer t(net, data.map(), o);
    const std::string message = testing::expect_error([&] { t.fit(); }, ErrorCategory::kNumeric);
    EXPECT_TRUE(testing::contains(message, "training diverged at epoch 2, batch 4 of 13: "))
        << message;
    EXPECT_TRUE(testing::contains(message, "weights into layer 'Output'")) << message;
    EXPECT_TRUE(testing::contains(message,
                                  "1 of this rank's 2160 values of "
                                  "weight:Hidden->Output"))
        << message;
    EXPECT_TRUE(testing::contains(message, dir.file("ck") + " (1 epochs and 0 batches)"))
        << message;
    EXPECT_EQ(epochs, std::vector<uint32_t>{1});
    // The checkpoint of epoch 1 is intact and finite.
    const io::ModelFile file = io::read_model(dir.file("ck"), true);
    EXPECT_EQ(file.training->epochs_complete, 1u);
    for (const io::ModelWeight& w : file.weights) {
        for (float v : w.values) ASSERT_TRUE(std::isfinite(v));
    }
    // Writing a checkpoint of non-finite parameters is refused and leaves the file as it was.
    const std::string before = testing::read_file(dir.file("ck"));
    EXPECT_TRUE(testing::contains(
        testing::expect_error([&] { t.save_checkpoint(dir.file("ck")); }, ErrorCategory::kNumeric),
        "weight:Hidden->Output are NaN or infinite"));
    EXPECT_EQ(testing::read_file(dir.file("ck")), before);
}

TEST(NumericalGuard, AnExplodingLearningRateIsReportedNotRepaired) {
    const Data data;
    Network net = fresh_network();
    TrainOptions o = options(OptimizerKind::kSgd, 3);
    o.optimizer.learning_rate = 1e30f;
    Trainer t(net, data.map(), o);
    const std::string message = testing::expect_error([&] { t.fit(); }, ErrorCategory::kNumeric);
    EXPECT_TRUE(testing::contains(message, "training diverged at epoch 1, batch ")) << message;
    // Which values go first (a weight, an activation, or only the bias gradient's sum of
    // squares) depends on the BLAS's rounding; the message names a layer whichever it is.
    EXPECT_TRUE(testing::contains(message, "the first non-finite values are in ")) << message;
    EXPECT_TRUE(testing::contains(message, " layer '")) << message;
    EXPECT_TRUE(testing::contains(message, "No checkpoint was written")) << message;

    // With the guard off the same run goes on to the end with NaN parameters (its loss may
    // still look finite: the cross-entropy clamps probabilities): the guard is what stops it.
    Network off = fresh_network();
    o.check_finite = false;
    const std::vector<EpochStats> stats = Trainer(off, data.map(), o).fit();
    ASSERT_EQ(stats.size(), 3u);
    const std::vector<float> params = all_parameters(off);
    EXPECT_TRUE(std::any_of(params.begin(), params.end(), [](float v) { return std::isnan(v); }));
    std::printf("the guard's message: %s\n", message.c_str());
}

}  // namespace
}  // namespace sparsenet
