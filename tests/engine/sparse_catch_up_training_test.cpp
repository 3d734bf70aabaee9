// Exact sparse-input updates of Momentum and Nesterov through the Trainer: the row clock
// (rows the batch does not touch are caught up in closed form when next read) against the
// every-row exact path, over whole runs; bit-exact across a checkpoint written inside an epoch
// and a resume; the combinations that keep the every-row path (L2 with Decay); and the refusal of
// every-row exact updates (Adam) on a sparse input wider than 2^21 rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/network_impl.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

const char* kAutoencoder = R"({
  "Name": "ae", "ErrorFunction": "ScaledMarginalCrossEntropy", "ShuffleIndices": true,
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 16, "Activation": "Tanh"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "Sigmoid",
     "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -2.0}}
  ]})";

struct Data {
    Dataset in, out;
    Data() {
        GenerateOptions g;
        g.users = 240;
        g.items = 150;
        g.nnz = 240 * 4;  // about 4 items per user: a batch of 8 touches ~30 of 150 rows
        g.seed = 12;
        in = generate(g).train;
        out = in;
        in.name = "in";
        out.name = "out";
    }
    std::map<std::string, const Dataset*> map() const { return {{"in", &in}, {"out", &out}}; }
};

Network make_network(const Data& d, bool row_clock) {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 31;
    Network net = Network::create(NetworkConfig::from_json(kAutoencoder),
                                  {{"in", d.in.cols}, {"out", d.out.cols}}, o);
    net.impl().options.switches.row_catch_up = row_clock;
    return net;
}

TrainOptions options(OptimizerKind kind, float l2, float decay, uint32_t epochs) {
    TrainOptions t;
    t.epochs = epochs;
    t.batch = 8;
    t.optimizer.kind = kind;
    t.optimizer.learning_rate = 0.02f;
    t.optimizer.mu = 0.9f;
    t.optimizer.l2 = l2;
    t.decay = decay;
    t.seed = 4;
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

bool identical(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool clock_allocated(Network& net) {
    return net.impl().params.edges[0].row_clock.size() > 0;  // edge 0: Input -> Hidden
}

struct Case {
    OptimizerKind kind;
    float l2, decay;
};

// Three epochs of 30 steps each, a batch touching about a fifth of the input rows: the clock
// run equals the every-row run to float rounding. Tolerance: the two differ per catch-up by the
// every-row path's float rounding of the skipped steps (a few ulps of the values per step,
// tests/backend/row_catch_up_test.cpp), and training carries such differences through the
// gradients of later steps; 90 steps of a 150 -> 16 -> 150 network stay below 1e-5 of the
// largest parameter (measured: 1.0e-7 at most, one or two ulps of the largest weight).
TEST(SparseCatchUpTraining, EqualsTheEveryRowUpdateOverARun) {
    const Data data;
    for (Case c :
         {Case{OptimizerKind::kMomentum, 0.0f, 0.0f},
          Case{OptimizerKind::kMomentum, 0.0f, 0.05f},  // Decay: lr drops out
          Case{OptimizerKind::kMomentum, 0.01f, 0.0f}, Case{OptimizerKind::kNesterov, 0.0f, 0.0f},
          Case{OptimizerKind::kNesterov, 0.01f, 0.0f}}) {
        const std::string what = std::string(to_string(c.kind)) + " l2=" + std::to_string(c.l2) +
                                 " decay=" + std::to_string(c.decay);
        Network clocked = make_network(data, true);
        Network every_row = make_network(data, false);
        {
            Trainer t(clocked, data.map(), options(c.kind, c.l2, c.decay, 3));
            t.fit();
        }
        {
            Trainer t(every_row, data.map(), options(c.kind, c.l2, c.decay, 3));
            t.fit();
        }
        EXPECT_TRUE(clock_allocated(clocked)) << what;
        EXPECT_FALSE(clock_allocated(every_row)) << what;
        const std::vector<float> a = all_parameters(clocked), b = all_parameters(every_row);
        ASSERT_EQ(a.size(), b.size());
        double scale = 0.0, diff = 0.0;
        for (size_t i = 0; i < a.size(); ++i) {
            scale = std::max(scale, double(std::fabs(b[i])));
            diff = std::max(diff, double(std::fabs(a[i] - b[i])));
        }
        EXPECT_LE(diff, 1e-5 * scale) << what << ": largest difference " << diff;
        EXPECT_FALSE(identical(a, std::vector<float>(a.size(), 0.0f)));
    }
}

// Two sparse inputs into one hidden layer: each matrix keeps its own clock.
TEST(SparseCatchUpTraining, TwoSparseInputsEachOnItsClock) {
    const Data data;
    Dataset in2 = data.in;
    in2.name = "in2";
    const std::map<std::string, const Dataset*> all{
        {"in", &data.in}, {"in2", &in2}, {"out", &data.out}};
    const NetworkConfig config = NetworkConfig::from_json(R"({
      "Name": "two", "ErrorFunction": "ScaledMarginalCrossEntropy",
      "Layers": [
        {"Name": "A", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "B", "Kind": "Input", "N": "auto", "DataSet": "in2", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 12, "Source": ["A", "B"], "Activation": "Tanh"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid"}
      ]})");
    std::vector<float> results[2];
    for (bool clock : {true, false}) {
        NetworkOptions o;
        o.device = "cpu";
        o.threads = 2;
        o.seed = 5;
        Network net = Network::create(
            config, {{"in", data.in.cols}, {"in2", in2.cols}, {"out", data.out.cols}}, o);
        net.impl().options.switches.row_catch_up = clock;
        Trainer t(net, all, options(OptimizerKind::kNesterov, 0.01f, 0.0f, 2));
        t.fit();
        int clocked = 0;
        for (const auto& e : net.impl().params.edges) clocked += e.row_clock.size() > 0;
        EXPECT_EQ(clocked, clock ? 2 : 0);
        results[clock ? 0 : 1] = all_parameters(net);
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    double scale = 0.0, diff = 0.0;
    for (size_t i = 0; i < results[0].size(); ++i) {
        scale = std::max(scale, double(std::fabs(results[1][i])));
        diff = std::max(diff, double(std::fabs(results[0][i] - results[1][i])));
    }
    EXPECT_LE(diff, 1e-5 * scale) << "largest difference " << diff;
}

// L2 with a decaying learning rate has no closed form (a different map each step): the clock is
// not used and the run is the every-row run bit for bit.
TEST(SparseCatchUpTraining, L2WithDecayKeepsTheEveryRowPath) {
    const Data data;
    Network a = make_network(data, true), b = make_network(data, false);
    {
        Trainer t(a, data.map(), options(OptimizerKind::kMomentum, 0.01f, 0.05f, 2));
        t.fit();
    }
    {
        Trainer t(b, data.map(), options(OptimizerKind::kMomentum, 0.01f, 0.05f, 2));
        t.fit();
    }
    EXPECT_FALSE(clock_allocated(a));
    EXPECT_TRUE(identical(all_parameters(a), all_parameters(b)));
}

// A checkpoint written inside an epoch, then a resume: the resumed run ends bit for bit where
// the run that wrote the checkpoint (and went on) ended.
TEST(SparseCatchUpTraining, ResumeFromInsideAnEpochIsBitExact) {
    const Data data;
    for (Case c : {Case{OptimizerKind::kMomentum, 0.01f, 0.0f},
                   Case{OptimizerKind::kNesterov, 0.0f, 0.02f}}) {
        const std::string what = to_string(c.kind);
        testing::TempDir dir;
        Network live = make_network(data, true);
        {
            TrainOptions o = options(c.kind, c.l2, c.decay, 2);
            Trainer* self = nullptr;
            o.on_batch = [&](const BatchProgress& p) {
                if (p.epoch == 2 && p.batch == 7) self->save_checkpoint(dir.file("ck"));
            };
            Trainer t(live, data.map(), o);
            self = &t;
            t.fit();
        }
        EXPECT_TRUE(clock_allocated(live)) << what;
        NetworkOptions no;
        no.device = "cpu";
        no.threads = 2;
        Network resumed = Network::load(dir.file("ck"), no);
        {
            Trainer t(resumed, data.map(), options(c.kind, c.l2, c.decay, 2));
            t.resume(dir.file("ck"));
            t.fit();
        }
        EXPECT_TRUE(identical(all_parameters(resumed), all_parameters(live))) << what;
    }
}

// Every-row exact updates of a sparse input wider than 2^21 rows are refused before any step
// (and before the optimizer state is allocated), naming what to use; lazy Adam and exact
// Momentum (on the clock) at the same width are accepted.
TEST(SparseCatchUpTraining, EveryRowExactUpdatesOfAWideInputAreRefused) {
    const uint32_t wide = (1u << 21) + 1;
    Dataset in, out;
    in.name = "in";
    in.rows = 2;
    in.cols = wide;
    in.offsets = {0, 2, 3};
    in.indices = {5, wide - 1, 17};
    out.name = "out";
    out.rows = 2;
    out.cols = 3;
    out.offsets = {0, 1, 2};
    out.indices = {0, 2};
    const std::map<std::string, const Dataset*> data{{"in", &in}, {"out", &out}};
    NetworkOptions no;
    no.device = "cpu";
    no.threads = 2;
    Network net = Network::create(NetworkConfig::from_json(R"({
      "ErrorFunction": "CrossEntropy",
      "Layers": [
        {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "H", "Kind": "Hidden", "N": 2, "Activation": "Tanh"},
        {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "Sigmoid"}
      ]})"),
                                  {{"in", wide}, {"out", 3}}, no);
    TrainOptions o;
    o.epochs = 1;
    o.batch = 2;
    o.optimizer.kind = OptimizerKind::kAdam;
    o.optimizer.learning_rate = 0.001f;
    try {
        Trainer t(net, data, o);
        ADD_FAILURE() << "expected the exact Adam update of a 2^21 + 1 row input to be refused";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        const std::string m = e.what();
        EXPECT_NE(m.find("adam"), std::string::npos) << m;
        EXPECT_NE(m.find(std::to_string(wide) + " rows of weight:In->H"), std::string::npos) << m;
        EXPECT_NE(m.find("--sparse-updates lazy"), std::string::npos) << m;
        EXPECT_NE(m.find("Momentum"), std::string::npos) << m;
    }
    // Nothing was allocated for the refused run's optimizer.
    EXPECT_EQ(net.impl().params.edges[0].state1.size(), 0u);
    o.optimizer.sparse_update = SparseUpdate::kLazy;
    {
        Trainer t(net, data, o);
        t.fit();
    }
    o.optimizer.kind = OptimizerKind::kMomentum;
    o.optimizer.sparse_update = SparseUpdate::kExact;
    {
        Trainer t(net, data, o);
        t.fit();
    }
    EXPECT_TRUE(clock_allocated(net));
}

}  // namespace
}  // namespace sparsenet
