// Padded rows (engine::padded_ld, issue 33): an unsplit network stores every matrix, optimizer
// state slot, gradient and layer buffer whose width is not a multiple of 16 floats with rows
// padded to one, so that cuBLAS runs its aligned kernels. What leaves the network stays packed:
// model files, parameters, gradients, scores. These tests run the same work padded and packed
// (StepSwitches::padded_ld off) and compare bit for bit: on the CPU the padding moves where rows
// start, never the order of a sum.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/network_impl.h"
#include "engine/small_network_util.h"
#include "library/library_test_util.h"
#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/recommender.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

// 83 items (ld 96), hidden layers of 24 (32) and 20 (32), behind a sparse input; `extra` adds
// keys to Hidden2, `output` more keys to the Output layer.
std::string network_json(const std::string& extra = "", const std::string& output = "") {
    return R"({
      "Name": "padded", "ErrorFunction": "ScaledMarginalCrossEntropy", "ShuffleIndices": true,
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden1", "Kind": "Hidden", "N": 24, "Activation": "Sigmoid", "pDropout": 0.2},
        {"Name": "Hidden2", "Kind": "Hidden", "N": 20, "Activation": "Tanh")" +
           extra + R"(},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid", "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -2.0})" +
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
};

TrainedRun train(const std::string& json, const OptimizerOptions& optimizer, bool packed,
                 const std::string& save_to = "") {
    StepSwitches switches;
    switches.padded_ld = !packed;
    const Dataset in = planted("in"), out = planted("out");
    Network net = make_network(json, switches);
    TrainOptions o;
    o.epochs = 2;
    o.batch = 32;
    o.optimizer = optimizer;
    Trainer trainer(net, {{"in", &in}, {"out", &out}}, o);
    TrainedRun r;
    for (const EpochStats& e : trainer.fit()) r.losses.push_back(e.loss);
    for (const Parameter& p : net.parameters()) r.parameters.push_back(net.get_parameter(p.name));
    Predictor predictor(net, {{"in", &in}});
    r.scores = predictor.scores(0, uint32_t(in.rows));
    r.gradients = trainer.compute_gradients(0, 32);
    if (!save_to.empty()) net.save(save_to);
    return r;
}

using testing::optimizer;

void expect_identical(const TrainedRun& padded, const TrainedRun& packed) {
    EXPECT_EQ(padded.losses, packed.losses);
    ASSERT_EQ(padded.parameters.size(), packed.parameters.size());
    for (size_t p = 0; p < padded.parameters.size(); ++p)
        EXPECT_EQ(padded.parameters[p], packed.parameters[p]) << "parameter " << p;
    EXPECT_EQ(padded.scores, packed.scores);
    EXPECT_EQ(padded.gradients, packed.gradients);
}

TEST(PaddedLd, RoundsWidthsUpToSixteenFloats) {
    EXPECT_EQ(engine::padded_ld(0, true), 0u);
    EXPECT_EQ(engine::padded_ld(1, true), 16u);
    EXPECT_EQ(engine::padded_ld(16, true), 16u);
    EXPECT_EQ(engine::padded_ld(20, true), 32u);
    EXPECT_EQ(engine::padded_ld(27278, true), 27280u);
    EXPECT_EQ(engine::padded_ld(10000000, true), 10000000u);
    EXPECT_EQ(engine::padded_ld(27278, false), 27278u);
}

// The plan of an unsplit network: every layer buffer and matrix padded, and the buffers sized
// by the padded rows.
TEST(PaddedLd, PlanPadsLayerBuffersAndMatrices) {
    for (bool packed : {false, true}) {
        SCOPED_TRACE(packed ? "packed" : "padded");
        StepSwitches switches;
        switches.padded_ld = !packed;
        Network net = make_network(network_json(), switches);
        const Network::Impl& impl = net.impl();
        const uint32_t want_ld[] = {0, 32, 32, 96};  // Input, Hidden1, Hidden2, Output
        for (size_t l = 1; l < impl.graph.layers.size(); ++l) {
            const uint32_t n = impl.graph.layers[l].n;
            EXPECT_EQ(impl.plan.layers[l].ld, packed ? n : want_ld[l]) << "layer " << l;
        }
        for (size_t e = 0; e < impl.graph.edges.size(); ++e) {
            const uint32_t cols = impl.graph.edges[e].cols;
            const engine::EdgeSplit& block = impl.plan.edges[e];
            EXPECT_EQ(block.ld, packed ? cols : engine::padded_ld(cols, true)) << "edge " << e;
            EXPECT_EQ(impl.params.edges[e].w.size(), block.elements()) << "edge " << e;
        }
    }
}

// Fused SGD and Momentum (the update inside the gradient GEMM), Adam with L1 (the materialised
// gradient), exact Momentum on the sparse input (row clocks and their catch-up): 2 epochs give
// the same losses, parameters, scores and gradients padded and packed.
TEST(PaddedLd, TrainingIsBitForBitThePackedOne) {
    for (const OptimizerOptions& o :
         {optimizer(OptimizerKind::kSgd, 0.5f, 0.01f), optimizer(OptimizerKind::kMomentum, 0.1f),
          optimizer(OptimizerKind::kAdam, 0.01f, 0.0f, 1e-4f),
          optimizer(OptimizerKind::kNesterov, 0.05f, 1e-3f)}) {
        SCOPED_TRACE(to_string(o.kind));
        expect_identical(train(network_json(), o, false), train(network_json(), o, true));
    }
}

// WeightNorm (column clipping over padded rows), DeltaNorm, a Skip, and an output edge that
// multiplies by the input matrix transposed (SharedWeights: [83, 20] stored with 32-float rows),
// with AdaGrad.
TEST(PaddedLd, TopologyAndRegularisersTrainAsPacked) {
    const std::string json = R"({
      "Name": "padded-topology", "ErrorFunction": "ScaledMarginalCrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "H", "Kind": "Hidden", "N": 20, "Activation": "Tanh", "WeightNorm": 0.5},
        {"Name": "H2", "Kind": "Hidden", "N": 20, "Activation": "Sigmoid", "DeltaNorm": 1.0,
         "Skip": ["H"]},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid", "Source": ["H2"],
         "SharedWeights": {"InputLayer": "H2", "SourceInputLayer": "Input",
                           "SourceOutputLayer": "H", "Transposed": true}}
      ]})";
    const OptimizerOptions o = optimizer(OptimizerKind::kAdaGrad, 0.05f);
    expect_identical(train(json, o, false), train(json, o, true));
}

// A model file written padded holds the packed values: loaded either way it scores and
// recommends identically (fp16 screening included: its copy of the output matrix is read from
// padded rows).
TEST(PaddedLd, ModelFilesAndInferenceAreTheSameEitherWay) {
    testing::TempDir dir;
    const std::string model = dir.file("padded.nc");
    const TrainedRun trained =
        train(network_json(), optimizer(OptimizerKind::kMomentum, 0.1f), false, model);
    const Dataset in = planted("in");
    std::vector<Recommendations> answers[2];
    for (bool packed : {false, true}) {
        SCOPED_TRACE(packed ? "loaded packed" : "loaded padded");
        NetworkOptions no;
        no.device = "cpu";
        no.threads = 2;
        no.switches.padded_ld = !packed;
        Network net = Network::load(model, no);
        const std::vector<Parameter> params = net.parameters();
        for (size_t p = 0; p < params.size(); ++p)
            EXPECT_EQ(net.get_parameter(params[p].name), trained.parameters[p]) << params[p].name;
        Predictor predictor(net, {{"in", &in}});
        EXPECT_EQ(predictor.scores(0, uint32_t(in.rows)), trained.scores);
        // set_parameter, then get_parameter: the packed values back.
        std::vector<float> w = net.get_parameter("weight:Hidden2->Output");
        for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 97) * 0.01f;
        net.set_parameter("weight:Hidden2->Output", w);
        EXPECT_EQ(net.get_parameter("weight:Hidden2->Output"), w);

        RecommenderOptions ro;
        ro.fp16_screening = true;
        ro.switches.padded_ld = !packed;
        const Recommender screened(model, ro);
        std::mt19937 rng(7);
        for (int q = 0; q < 20; ++q) {
            RecommendOptions opts;
            opts.k = 10;
            answers[packed].push_back(
                screened.recommend(testing::random_items(rng, 83, 12, q % 2 == 0), opts));
        }
    }
    ASSERT_EQ(answers[0].size(), answers[1].size());
    for (size_t q = 0; q < answers[0].size(); ++q) {
        ASSERT_EQ(answers[0][q].items.size(), answers[1][q].items.size()) << "query " << q;
        for (size_t r = 0; r < answers[0][q].items.size(); ++r) {
            EXPECT_EQ(answers[0][q].items[r].id, answers[1][q].items[r].id) << "query " << q;
            EXPECT_EQ(answers[0][q].items[r].score, answers[1][q].items[r].score) << "query " << q;
        }
    }
}

}  // namespace
}  // namespace sparsenet
