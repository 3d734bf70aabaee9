// The output layer's delta written over its activations (Network::Impl::delta_over_activation,
// issue 44): an output layer that no other layer reads keeps one [batch, units] buffer for both.
// These tests train the same network with the delta in place and in its own buffer
// (StepSwitches::delta_over_activation off) and compare bit for bit on the CPU: losses, parameters,
// scores and gradients, over losses and activations (element-wise, SoftMax with the multinomial
// and the general Jacobian), optimizers (the fused SGD and Momentum steps read the delta in
// update()), DeltaNorm, the fused output epilogue and the unfused pass; and the memory plan
// counts one buffer where the delta is in place.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/network_impl.h"
#include "engine/small_network_util.h"
#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::ScopedEnv;

// 83 items (ld 96) behind a sparse input and two hidden layers; `output` adds keys to the
// Output layer.
std::string network_json(const std::string& loss, const std::string& activation,
                         const std::string& output = "") {
    return R"({
      "Name": "in-place", "ErrorFunction": ")" +
           loss + R"(", "ShuffleIndices": true,
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden1", "Kind": "Hidden", "N": 24, "Activation": "Sigmoid", "pDropout": 0.2},
        {"Name": "Hidden2", "Kind": "Hidden", "N": 20, "Activation": "Tanh"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": ")" +
           activation + R"(", "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -2.0})" +
           output + R"(}
      ]})";
}

using testing::make_network;
using testing::planted;

struct TrainedRun {
    std::vector<std::vector<float>> parameters;
    std::vector<double> losses;
    std::vector<float> scores;                            // [300, 83] of the trained network
    std::map<std::string, std::vector<float>> gradients;  // of one more batch, after training
    bool in_place = false;                                // the output layer had no delta buffer
};

TrainedRun train(const std::string& json, const OptimizerOptions& optimizer, bool in_place,
                 bool fused_epilogue = true) {
    StepSwitches switches;
    switches.delta_over_activation = in_place;
    switches.fused_epilogue = fused_epilogue;
    const Dataset in = planted("in"), out = planted("out");
    Network net = make_network(json, switches);
    TrainOptions o;
    o.epochs = 2;
    o.batch = 32;
    o.optimizer = optimizer;
    Trainer trainer(net, {{"in", &in}, {"out", &out}}, o);
    TrainedRun r;
    for (const EpochStats& e : trainer.fit()) r.losses.push_back(e.loss);
    const Network::Impl& impl = net.impl();
    const size_t output = impl.graph.layers.size() - 1;
    r.in_place = impl.plan.layers[output].delta_over_act;
    EXPECT_EQ(impl.buffers.layers[output].delta.size() == 0, r.in_place);
    EXPECT_GT(impl.buffers.layers[output].act.size(), 0u);
    for (const Parameter& p : net.parameters()) r.parameters.push_back(net.get_parameter(p.name));
    Predictor predictor(net, {{"in", &in}});
    r.scores = predictor.scores(0, uint32_t(in.rows));
    r.gradients = trainer.compute_gradients(0, 32);
    return r;
}

using testing::optimizer;

void expect_identical(const TrainedRun& in_place, const TrainedRun& apart) {
    EXPECT_TRUE(in_place.in_place);
    EXPECT_FALSE(apart.in_place);
    EXPECT_EQ(in_place.losses, apart.losses);
    ASSERT_EQ(in_place.parameters.size(), apart.parameters.size());
    for (size_t p = 0; p < in_place.parameters.size(); ++p)
        EXPECT_EQ(in_place.parameters[p], apart.parameters[p]) << "parameter " << p;
    EXPECT_EQ(in_place.scores, apart.scores);
    EXPECT_EQ(in_place.gradients, apart.gradients);
    EXPECT_LT(in_place.losses.back(), in_place.losses.front());  // it learned
}

struct Case {
    const char* loss;
    const char* activation;
    OptimizerOptions optimizer;
    std::string output_keys;
};

TEST(DeltaOverActivation, TrainingIsBitForBitTheTwoBufferOne) {
    const std::vector<Case> cases = {
        // SGD and Momentum run inside the weight-gradient GEMM, which reads the delta in update().
        {"ScaledMarginalCrossEntropy", "Sigmoid", optimizer(OptimizerKind::kSgd, 0.5f, 0.01f), ""},
        {"CrossEntropy", "SoftMax", optimizer(OptimizerKind::kMomentum, 0.1f), ""},
        {"CrossEntropy", "Sigmoid", optimizer(OptimizerKind::kAdam, 0.01f, 0.0f, 1e-4f), ""},
        // General SoftMax Jacobian (a row statistic before any element is written).
        {"L2", "SoftMax", optimizer(OptimizerKind::kNesterov, 0.1f), ""},
        {"L2", "Tanh", optimizer(OptimizerKind::kMomentum, 0.05f, 0.001f), ", \"DeltaNorm\": 0.5"},
        {"Hinge", "Linear", optimizer(OptimizerKind::kAdaGrad, 0.05f), ""},
        {"DataScaledMarginalCrossEntropy", "Sigmoid", optimizer(OptimizerKind::kRmsProp, 0.01f),
         ""},
    };
    for (const Case& c : cases) {
        for (bool fused_epilogue : {true, false}) {
            SCOPED_TRACE(std::string(c.loss) + " / " + c.activation + " / " +
                         to_string(c.optimizer.kind) + (fused_epilogue ? "" : ", unfused"));
            const std::string json = network_json(c.loss, c.activation, c.output_keys);
            expect_identical(train(json, c.optimizer, true, fused_epilogue),
                             train(json, c.optimizer, false, fused_epilogue));
        }
    }
}

// Two output layers (one of them on a Skip of a hidden layer): each writes its delta over its
// own activations, and training is the two-buffer one. (An output layer that another layer reads,
// as its Source or Skip, would keep two buffers: the reader's backward reads its activations
// after its delta is formed; the config refuses both readers today.)
TEST(DeltaOverActivation, EveryOutputLayerWritesItsDeltaOverItsActivations) {
    const std::string json = R"({
      "Name": "two", "ErrorFunction": "CrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 83, "Activation": "Tanh"},
        {"Name": "First", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid", "Source": "Hidden"},
        {"Name": "Second", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "SoftMax", "Source": "Input", "Skip": ["Hidden"]}
      ]})";
    Network net = make_network(json);
    const Network::Impl& impl = net.impl();
    EXPECT_FALSE(impl.delta_over_activation(1));  // Hidden: read by the Skip and its own edge
    EXPECT_TRUE(impl.delta_over_activation(2));
    EXPECT_TRUE(impl.delta_over_activation(3));
    for (const OptimizerOptions& o :
         {optimizer(OptimizerKind::kMomentum, 0.1f), optimizer(OptimizerKind::kAdam, 0.01f)}) {
        SCOPED_TRACE(to_string(o.kind));
        const TrainedRun a = train(json, o, true), b = train(json, o, false);
        EXPECT_TRUE(a.in_place);
        EXPECT_FALSE(b.in_place);
        EXPECT_EQ(a.losses, b.losses);
        EXPECT_EQ(a.parameters, b.parameters);
        EXPECT_EQ(a.scores, b.scores);
        EXPECT_EQ(a.gradients, b.gradients);
    }
}

// The plan counts one [batch, ld] buffer for the output layer where its delta is in place: at
// 100,003 items (ld 100,016) and batch 256, 256 x 100,016 x 4 B = 102.4 MB less.
TEST(DeltaOverActivation, ThePlanCountsOneBuffer) {
    const NetworkConfig config = NetworkConfig::from_json(network_json("CrossEntropy", "Sigmoid"));
    DatasetShape shape;
    shape.rows = shape.examples = 1000;
    shape.cols = 100003;
    shape.nnz = 20000;
    shape.boolean = true;
    shape.name = "in";
    DatasetShape out = shape;
    out.name = "out";
    const std::map<std::string, DatasetShape> shapes = {{"in", shape}, {"out", out}};
    const OptimizerOptions sgd = optimizer(OptimizerKind::kSgd, 0.1f);
    const MemoryPlan in_place = plan_memory(config, shapes, 1, 256, sgd, 0.0f);
    StepSwitches apart_switches;
    apart_switches.delta_over_activation = false;
    const MemoryPlan apart =
        plan_memory(config, shapes, 1, 256, sgd, 0.0f, false, Precision::kFp32, apart_switches);
    EXPECT_DOUBLE_EQ(apart.activations - in_place.activations, 256.0 * 100016 * 4);
    // Hidden layers keep both: 2 x 256 x (32 + 32) x 4 B, and the output's one buffer.
    EXPECT_DOUBLE_EQ(in_place.activations, 256.0 * (2 * (32 + 32) + 100016) * 4);
    EXPECT_DOUBLE_EQ(apart.device_bytes() - in_place.device_bytes(), 256.0 * 100016 * 4);
    // Split over 2 ranks: each rank's band of the output (50,002 units, rows padded to 50,016),
    // once; the hidden bands (12 and 10 units) padded to 16.
    const MemoryPlan split = plan_memory(config, shapes, 2, 256, sgd, 0.0f);
    EXPECT_DOUBLE_EQ(split.activations, 256.0 * (2 * (16 + 16) + 50016) * 4);
}

}  // namespace
}  // namespace sparsenet
