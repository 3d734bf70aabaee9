// Padded rows on a split network under mpirun (-np 1, 2, 3): every rank stores its blocks of the
// matrices, their optimizer state and gradients, and its bands of the layer buffers with rows
// padded to engine::padded_ld of the local width, as one rank does (docs/architecture.md,
// "Padded rows"), while collectives, save chunks, checkpoints, parameters and gradients handed out
// stay packed. Two checks:
//  - the same training padded and packed (StepSwitches::padded_ld off) gives the same bits on every
//    rank: losses, parameters, gradients, scores, top-K, checkpoint files (as
//    tests/engine/padded_ld_test.cpp does for one rank);
//  - every GEMM a rank issues for dsstne-bench, mult-dae and a wide network, recorded as a GPU
//    would run it, has aligned extents and leading dimensions (tests/support/gemm_recorder.h, as
//    tests/engine/gemm_shapes_test.cpp does for one rank); packed split rows would not.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/network_impl.h"
#include "io/model_file.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/gemm_recorder.h"
#include "support/split_networks.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using mpi_testing::Data;
using mpi_testing::kDeep;
using mpi_testing::kSoftmax;
using mpi_testing::world_rank;
using mpi_testing::world_size;

NetworkOptions split_options() {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 1;
    o.comm = parse_comm_kind("mpi");
    o.parallel = parse_parallel_mode("model");
    return o;
}

// One path for every rank: rank 0's temporary directory (kept alive by *dir on rank 0).
std::string shared_dir(std::unique_ptr<testing::TempDir>* dir) {
    char path[4096] = {0};
    if (world_rank() == 0) {
        *dir = std::make_unique<testing::TempDir>();
        std::snprintf(path, sizeof path, "%s", (*dir)->path().c_str());
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    return path;
}

// Whether some band or block of this rank is stored with rows wider than its width.
bool stores_padding(const Network& net) {
    const Network::Impl& impl = net.impl();
    bool padded = false;
    for (size_t l = 0; l < impl.graph.layers.size(); ++l) {
        if (impl.graph.layers[l].is_input()) continue;
        padded = padded || impl.plan.layers[l].ld != impl.plan.layers[l].n_local;
    }
    for (size_t i = 0; i < impl.graph.edges.size(); ++i) {
        if (impl.graph.edges[i].owner != int(i)) continue;
        padded = padded || impl.plan.edges[i].ld != impl.plan.edges[i].local_cols;
    }
    return padded;
}

struct Run {
    std::vector<double> losses;
    std::map<std::string, std::vector<float>> parameters, gradients;
    std::vector<float> scores;
    TopK top;
};

// Trains `json` split over the job's ranks, padded or packed, and saves a checkpoint to `path`
// in chunks of a few floats (every chunk crossing rows of every rank's padded block).
Run train(const std::string& json, const Data& d, OptimizerKind kind, float learning_rate,
          bool packed, const std::string& path) {
    NetworkOptions no = split_options();
    no.switches.padded_ld = !packed;
    Network net = Network::create(NetworkConfig::from_json(json), d.widths(), no);
    EXPECT_EQ(stores_padding(net), !packed) << "rank " << world_rank();
    TrainOptions t;
    t.epochs = 2;
    t.batch = 50;
    t.seed = 7;
    t.optimizer.kind = kind;
    t.optimizer.learning_rate = learning_rate;
    Trainer trainer(net, d.all(), t);
    Run r;
    for (const EpochStats& e : trainer.fit()) r.losses.push_back(e.loss);
    for (const Parameter& p : net.parameters()) r.parameters[p.name] = net.get_parameter(p.name);
    net.impl().file_chunk_floats = 5;
    trainer.save_checkpoint(path);
    r.gradients = trainer.compute_gradients(5, 30);
    Predictor predictor(net, {{"in", &d.in}});
    r.scores = predictor.scores(0, 40);
    PredictOptions po;
    po.k = 10;
    r.top = predictor.top_k(po, &d.in);
    return r;
}

void expect_same_files(const std::string& a_path, const std::string& b_path) {
    const io::ModelFile a = io::read_model(a_path, true);
    const io::ModelFile b = io::read_model(b_path, true);
    ASSERT_EQ(a.weights.size(), b.weights.size());
    for (size_t i = 0; i < a.weights.size(); ++i) {
        EXPECT_EQ(a.weights[i].values, b.weights[i].values) << "weight" << i;
        EXPECT_EQ(a.weights[i].state1, b.weights[i].state1) << "weight" << i;
        EXPECT_EQ(a.weights[i].state2, b.weights[i].state2) << "weight" << i;
    }
    ASSERT_EQ(a.biases.size(), b.biases.size());
    for (size_t i = 0; i < a.biases.size(); ++i) {
        EXPECT_EQ(a.biases[i].values, b.biases[i].values) << "bias" << i;
        EXPECT_EQ(a.biases[i].state1, b.biases[i].state1) << "bias" << i;
        EXPECT_EQ(a.biases[i].state2, b.biases[i].state2) << "bias" << i;
    }
}

void expect_padded_as_packed(const std::string& json, const Data& d, OptimizerKind kind,
                             float learning_rate) {
    SCOPED_TRACE(std::string(to_string(kind)) + ", rank " + std::to_string(world_rank()) + " of " +
                 std::to_string(world_size()));
    std::unique_ptr<testing::TempDir> dir;
    const std::string root = shared_dir(&dir);
    const Run padded = train(json, d, kind, learning_rate, false, root + "/padded.nc");
    const Run packed = train(json, d, kind, learning_rate, true, root + "/packed.nc");
    EXPECT_EQ(padded.losses, packed.losses);
    ASSERT_EQ(padded.parameters.size(), packed.parameters.size());
    for (const auto& kv : packed.parameters) EXPECT_EQ(padded.parameters.at(kv.first), kv.second);
    ASSERT_EQ(padded.gradients.size(), packed.gradients.size());
    for (const auto& kv : packed.gradients) EXPECT_EQ(padded.gradients.at(kv.first), kv.second);
    EXPECT_EQ(padded.scores, packed.scores);
    EXPECT_EQ(padded.top.indices, packed.top.indices);
    EXPECT_EQ(padded.top.scores, packed.top.scores);
    expect_same_files(root + "/padded.nc", root + "/packed.nc");
    MPI_Barrier(MPI_COMM_WORLD);  // nobody reads the files once rank 0 removes them
}

// Adam (the dense gradients materialised), SGD (the steps inside the weight-gradient GEMMs and
// the sparse input's fused step, reading the gathered operands) and Momentum (the sparse
// input's row clock), on every rank.
TEST(ModelParallelPaddedRows, TrainAsPackedRowsBitForBit) {
    Data deep(240, 97, 3000);
    expect_padded_as_packed(kDeep, deep, OptimizerKind::kAdam, 0.003f);
    expect_padded_as_packed(kDeep, deep, OptimizerKind::kSgd, 0.5f);
    Data softmax(300, 103, 4000);
    expect_padded_as_packed(kSoftmax, softmax, OptimizerKind::kMomentum, 0.1f);
}

// ---- the GEMMs of a split network's ranks at the benchmarks' widths ----

NetworkConfig config_file(const std::string& name) {
    return NetworkConfig::from_json(
        testing::read_file(std::string(SPARSENET_SOURCE_DIR) + "/configs/" + name));
}

// One step of `batch` rows with `kind` and predict's top-K on this rank's part of the split
// network, recorded; the faults found (none expected unless packed).
testing::RecordedGemms record_step(const NetworkConfig& config, uint32_t items, uint32_t batch,
                                   OptimizerKind kind, bool padded = true) {
    GenerateOptions g;
    g.users = batch;
    g.items = items;
    g.nnz = uint64_t(batch) * 20;
    g.seed = 3;
    Dataset in = generate(g).train;
    in.name = "gl_input";
    Dataset out = in;
    out.name = "gl_output";
    NetworkOptions no = split_options();
    no.seed = 5;
    no.switches.padded_ld = padded;
    Network net = Network::create(config, {{"gl_input", items}, {"gl_output", items}}, no);
    testing::GemmRecorder recorder;
    TrainOptions t;
    t.epochs = 1;
    t.batch = batch;
    t.optimizer = testing::optimizer(kind, 0.01f);
    Trainer trainer(net, {{"gl_input", &in}, {"gl_output", &out}}, t);
    trainer.fit();
    Predictor predictor(net, {{"gl_input", &in}});
    PredictOptions p;
    p.k = 10;
    predictor.top_k(p, &in);
    return recorder.result();
}

void check_split_shapes(const std::string& what, const NetworkConfig& config, uint32_t items,
                        uint32_t batch, OptimizerKind kind) {
    SCOPED_TRACE(what + " with " + to_string(kind) + ", rank " + std::to_string(world_rank()) +
                 " of " + std::to_string(world_size()));
    const testing::RecordedGemms r = record_step(config, items, batch, kind);
    EXPECT_GT(r.calls, 0u);
    EXPECT_TRUE(r.faults.empty()) << r.faults.size() << " faults:" << r.fault_text();
    if (world_rank() == 0) {
        std::printf("%s, %s, rank 0 of %d: %zu GEMMs, distinct GPU shapes:%s\n", what.c_str(),
                    to_string(kind), world_size(), r.calls, r.shape_text().c_str());
    }
}

// dsstne-bench: 27,278 items (bands of 13,639 over 2 ranks, 9,092/9,093 over 3), 1,024 x 3
// hidden (341/342 over 3), batch 256; SGD takes the update inside the weight-gradient GEMM,
// Adam materialises the gradient. mult-dae: 20,108 items, 600 -> 200 -> 600, split SoftMax.
TEST(ModelParallelPaddedRows, GemmShapesAtBenchmarkWidthsAreAligned) {
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam})
        check_split_shapes("dsstne-bench", config_file("dsstne-bench.json"), 27278, 256, kind);
    check_split_shapes("mult-dae", config_file("mult-dae.json"), 20108, 500, OptimizerKind::kAdam);
}

// The wide network's layers (input -> 256 -> output) with an odd item count; packed split rows
// (StepSwitches::padded_ld off) give the unaligned extents the padding removes, on every rank of a
// split.
TEST(ModelParallelPaddedRows, WideNetworkIsAlignedAndPackedRowsAreNot) {
    const NetworkConfig config = NetworkConfig::from_json(R"({
      "Version": 0.9, "Name": "wide", "Kind": "AutoEncoder",
      "ErrorFunction": "ScaledMarginalCrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 256, "Activation": "Sigmoid"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
         "Activation": "Sigmoid", "Sparse": true}]})");
    check_split_shapes("wide", config, 20003, 256, OptimizerKind::kMomentum);
    const testing::RecordedGemms r =
        record_step(config, 20003, 256, OptimizerKind::kMomentum, /*padded=*/false);
    // The output band's columns run along n: 20,003 on one rank, 10,001/10,002 over 2, 6,667/
    // 6,668/6,668 over 3 (ranks 1 and 2 of 3 hold an aligned band even packed).
    const bool unaligned_here = engine::band_of(20003, world_size(), world_rank()).count % 4 != 0;
    EXPECT_EQ(!r.faults.empty(), unaligned_here)
        << "rank " << world_rank() << " of " << world_size() << ":" << r.fault_text();
}

}  // namespace
}  // namespace sparsenet
