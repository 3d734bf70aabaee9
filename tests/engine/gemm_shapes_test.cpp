// The GEMMs a training step and predict issue, at the benchmarks' shapes, as a GPU would run them
// (issue 43, item 1; backend/gemm_extents.h). The engine runs on the CPU with a GEMM observer that
// records every call; for each, the extents the CUDA backend runs (gpu_gemm_extents) must be
// aligned wherever they run along a contiguous dimension and are a layer's width of 64 or more
// (cuBLAS otherwise picks `align1` kernels: 583 of 1,441 us of an H100 dsstne-bench step), every
// leading dimension too, and the padding those extents read must hold zeros (the contract that
// makes running over it exact). The same checks on a split network's ranks, at the same widths:
// tests/mpi/mpi_padded_rows_test.cpp (mpirun -np 1, 2, 3).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/gemm_extents.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/recommender.h"
#include "sparsenet/trainer.h"
#include "support/gemm_recorder.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::GemmRecorder;
using testing::RecordedGemms;

Dataset dataset(const std::string& name, uint64_t users, uint32_t items, uint64_t nnz) {
    GenerateOptions g;
    g.users = users;
    g.items = items;
    g.nnz = nnz;
    g.seed = 3;
    Dataset d = generate(g).train;
    d.name = name;
    return d;
}

// One epoch of `batch` rows (one step) with `kind`, then predict's top-K and a Recommender
// query, all under the recorder; fails with every fault found.
void check_shapes(const std::string& what, const NetworkConfig& config, uint32_t items,
                  uint32_t batch, OptimizerKind kind) {
    SCOPED_TRACE(what + " with " + to_string(kind));
    const Dataset in = dataset("gl_input", batch, items, uint64_t(batch) * 20);
    Dataset out = in;
    out.name = "gl_output";
    NetworkOptions no;
    no.device = "cpu";
    no.threads = 2;
    no.seed = 5;
    Network net = Network::create(config, {{"gl_input", items}, {"gl_output", items}}, no);
    GemmRecorder recorder;
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
    const testing::TempDir dir;
    net.save(dir.file("model.nc"));
    RecommenderOptions ro;
    Recommender rec(dir.file("model.nc"), ro);
    RecommendOptions one;
    one.k = 10;
    rec.recommend({ItemRef(1), ItemRef(2)}, one);
    const RecordedGemms& r = recorder.result();
    EXPECT_GT(r.calls, 0u);
    EXPECT_TRUE(r.faults.empty()) << r.faults.size() << " faults:" << r.fault_text();
    std::printf("%s, %s: %zu GEMMs, distinct GPU shapes:%s\n", what.c_str(), to_string(kind),
                r.calls, r.shape_text().c_str());
}

NetworkConfig config_file(const std::string& name) {
    return NetworkConfig::from_json(
        testing::read_file(std::string(SPARSENET_SOURCE_DIR) + "/configs/" + name));
}

// dsstne-bench: 27,278 items (ML-20M), 1,024 x 3 hidden, batch 256. SGD and Momentum take the
// update inside the weight-gradient GEMM; Adam materialises the gradient.
TEST(GemmShapes, DsstneBenchIsAligned) {
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam})
        check_shapes("dsstne-bench", config_file("dsstne-bench.json"), 27278, 256, kind);
}

// mult-dae: 20,108 items (its benchmark), 600 -> 200 -> 600, SoftMax output, batch 500.
TEST(GemmShapes, MultDaeIsAligned) {
    check_shapes("mult-dae", config_file("mult-dae.json"), 20108, 500, OptimizerKind::kAdam);
}

// The 10M network's layers (input -> 256 -> output, scripts/gpu-validate's wide10m) at batch 256
// with 100,003 items instead of 10,000,000 (two 10 GB matrices do not fit a test machine; 10M is a
// multiple of 16, 100,003 is the unaligned case).
TEST(GemmShapes, WideNetworkIsAligned) {
    const NetworkConfig config = NetworkConfig::from_json(R"({
      "Version": 0.9, "Name": "wide10m", "Kind": "AutoEncoder",
      "ErrorFunction": "ScaledMarginalCrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 256, "Activation": "Sigmoid"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
         "Activation": "Sigmoid", "Sparse": true}]})");
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kMomentum})
        check_shapes("wide", config, 100003, 256, kind);
}

// The rules themselves: where an extent runs over padding and where it cannot.
TEST(GemmShapes, ExtentsRunOverZeroPaddingOnlyAlongColumns) {
    std::vector<float> buf(1);
    const ConstMatrixView act(buf.data(), 256, 1024, 1024, true);
    const ConstMatrixView w(buf.data(), 1024, 27278, 27280, true);
    const ConstMatrixView z(buf.data(), 256, 27278, 27280, true);
    // Forward z = act . w: n over the padding of w and z.
    GemmExtents e = gpu_gemm_extents(false, false, act, w, z, 4);
    EXPECT_EQ(e.m, 256u);
    EXPECT_EQ(e.n, 27280u);
    EXPECT_EQ(e.k, 1024u);
    // Input delta d = z . w^T: k over both paddings.
    e = gpu_gemm_extents(false, true, z, w, act, 4);
    EXPECT_EQ(e.n, 1024u);
    EXPECT_EQ(e.k, 27280u);
    // Weight gradient dw = act^T . z: n over the padding; k is the batch.
    e = gpu_gemm_extents(true, false, act, z, w, 4);
    EXPECT_EQ(e.m, 1024u);
    EXPECT_EQ(e.n, 27280u);
    EXPECT_EQ(e.k, 256u);
    // Not zero_padded, or not room in ld, or a transposed B whose rows would be n: logical.
    ConstMatrixView packed = w;
    packed.zero_padded = false;
    EXPECT_EQ(gpu_gemm_extents(false, false, act, packed, z, 4).n, 27278u);
    ConstMatrixView tight = z;
    tight.ld = 27278;
    EXPECT_EQ(gpu_gemm_extents(false, false, act, w, tight, 4).n, 27278u);
    const ConstMatrixView wt(buf.data(), 27278, 1024, 1024, true);  // [n, k], B transposed
    EXPECT_EQ(gpu_gemm_extents(false, true, act, wt, z, 4).n, 27278u);
    // BF16 operands: multiples of 8 (27,280 is one).
    EXPECT_EQ(gpu_gemm_extents(false, false, act, w, z, 8).n, 27280u);
    const ConstMatrixView w20(buf.data(), 1024, 20, 32, true), z20(buf.data(), 256, 20, 32, true);
    EXPECT_EQ(gpu_gemm_extents(false, false, act, w20, z20, 8).n, 24u);
}

}  // namespace
}  // namespace sparsenet
