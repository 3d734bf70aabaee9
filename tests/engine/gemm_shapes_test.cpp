// The GEMMs a training step and predict issue, at the benchmarks' shapes, as a GPU would run them
// (issue 43, item 1; backend/gemm_extents.h). The engine runs on the CPU with a GEMM observer that
// records every call; for each, the extents the CUDA backend runs (gpu_gemm_extents) must be
// aligned wherever they run along a contiguous dimension and are a layer's width of 64 or more
// (cuBLAS otherwise picks `align1` kernels: 583 of 1,441 us of an H100 dsstne-bench step), every
// leading dimension too, and the padding those extents read must hold zeros (the contract that
// makes running over it exact).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/gemm_extents.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/recommender.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

struct Recorded {
    std::set<std::string> shapes;    // "m x n x k (trans_a trans_b) ld a/b/c", distinct
    std::vector<std::string> faults;  // unaligned extents, nonzero padding
    size_t calls = 0;
};

// The padding of v that extent `cols` runs over, [v.cols, cols) of every row, holds zeros.
bool padding_zero(const ConstMatrixView& v, size_t cols) {
    for (size_t r = 0; r < v.rows; ++r)
        for (size_t c = v.cols; c < cols; ++c)
            if (v.data[r * v.ld + c] != 0.0f) return false;
    return true;
}

void record(const GemmCall& call, void* context) {
    auto* rec = static_cast<Recorded*>(context);
    ++rec->calls;
    const GemmExtents e = gpu_gemm_extents(call.trans_a, call.trans_b, call.a, call.b, call.c,
                                           kGemmVectorFloats);
    std::ostringstream shape;
    shape << e.m << " x " << e.n << " x " << e.k << " (" << (call.trans_a ? 'T' : 'N')
          << (call.trans_b ? 'T' : 'N') << ") ld " << call.a.ld << "/" << call.b.ld << "/"
          << call.c.ld;
    rec->shapes.insert(shape.str());
    auto fault = [&](const std::string& what) { rec->faults.push_back(shape.str() + ": " + what); };
    // The extents along a contiguous dimension: n (C's columns), k where it is A's columns
    // (A not transposed) or B's (B transposed), m where it is A's columns (A transposed). The
    // batch only ever runs along rows.
    auto aligned = [&](size_t extent, const char* name) {
        if (extent >= 64 && extent % kGemmVectorFloats != 0) fault(std::string(name) + " unaligned");
    };
    aligned(e.n, "n");
    if (!call.trans_a || call.trans_b) aligned(e.k, "k");
    if (call.trans_a) aligned(e.m, "m");
    for (const ConstMatrixView* v : {&call.a, &call.b, &call.c})
        if (v->rows > 1 && v->ld % kGemmVectorFloats != 0) fault("a leading dimension unaligned");
    // The padding the extents run over is zeros (C's is read only where beta is not 0).
    if (e.n > call.c.cols && !padding_zero(call.b, e.n)) fault("b's padding is not zero");
    if (e.n > call.c.cols && call.beta != 0.0f && !padding_zero(call.c, e.n))
        fault("c's padding is not zero");
    if (e.k > (call.trans_a ? call.a.rows : call.a.cols)) {
        if (!padding_zero(call.a, e.k)) fault("a's padding is not zero");
        if (!padding_zero(call.b, e.k)) fault("b's padding is not zero");
    }
}

class GemmRecorder {
  public:
    GemmRecorder() { set_gemm_observer(record, &rec_); }
    ~GemmRecorder() { set_gemm_observer(nullptr, nullptr); }
    const Recorded& result() const { return rec_; }

  private:
    Recorded rec_;
};

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
    const Recorded& r = recorder.result();
    EXPECT_GT(r.calls, 0u);
    std::string faults;
    for (const std::string& f : r.faults) faults += "\n  " + f;
    EXPECT_TRUE(r.faults.empty()) << r.faults.size() << " faults:" << faults;
    std::string shapes;
    for (const std::string& s : r.shapes) shapes += "\n  " + s;
    std::printf("%s, %s: %zu GEMMs, distinct GPU shapes:%s\n", what.c_str(), to_string(kind),
                r.calls, shapes.c_str());
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
