// Whole training runs of two small networks on the CPU and on the device under test, compared
// epoch by epoch (losses, parameters, scores and top-K: tolerances in backend/parity_harness.h).
#include <cstdlib>

#include "backend/parity_harness.h"
#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"

namespace sparsenet::parity {
namespace {

// ---- full training on both devices ----

// SoftMax + multinomial CrossEntropy, a sparseness penalty, WeightNorm, DeltaNorm, SELU with
// alpha dropout.
const char* kSoftmaxNet = R"({
  "Version": 0.9, "Name": "sm", "Kind": "AutoEncoder",
  "Denoising": {"p": 0.3},
  "ErrorFunction": "CrossEntropy",
  "SparsenessPenalty": {"p": 0.1, "beta": 0.5},
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 40, "Activation": "Sigmoid", "Sparse": true,
     "WeightNorm": 3.0, "DeltaNorm": 1.0},
    {"Name": "Hidden2", "Kind": "Hidden", "N": 24, "Activation": "ScaledExponentialLinear",
     "pDropout": 0.2},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "SoftMax"}
  ]})";

struct TrainResult {
    std::vector<double> losses;
    std::vector<std::vector<float>> parameters;
    TopK top;
    std::vector<float> scores;  // [rows, items] of the trained network
};

TrainResult train_on(const std::string& device, const char* config_json, const Dataset& data,
                     OptimizerOptions optimizer, bool padded = true) {
    NetworkConfig config = NetworkConfig::from_json(config_json);
    Dataset in = data, out = data;
    in.name = "in";
    out.name = "out";
    NetworkOptions no;
    no.device = device;
    no.threads = 2;
    no.seed = 11;
    no.switches.padded_ld = padded;
    Network net = Network::create(config, {{"in", in.cols}, {"out", out.cols}}, no);
    TrainOptions to;
    to.epochs = 4;
    to.batch = 64;
    to.seed = 5;
    to.optimizer = optimizer;
    Trainer trainer(net, {{"in", &in}, {"out", &out}}, to);
    TrainResult r;
    for (const EpochStats& e : trainer.fit()) r.losses.push_back(e.loss);
    for (const Parameter& p : net.parameters()) r.parameters.push_back(net.get_parameter(p.name));
    Predictor predictor(net, {{"in", &in}});
    PredictOptions po;
    po.k = 10;
    po.batch = 100;
    r.top = predictor.top_k(po, &in);
    r.scores = predictor.scores(0, uint32_t(in.rows));
    return r;
}

// The planted data both devices train on: 300 users x 120 items.
Dataset parity_data() {
    GenerateOptions g;
    g.users = 300;
    g.items = 120;
    g.nnz = 5000;
    g.factors = 6;
    g.seed = 3;
    return generate(g).train;
}

void compare_training(const std::string& device, const char* config, OptimizerOptions opt) {
    const Dataset data = parity_data();
    const TrainResult c = train_on("cpu", config, data, opt);
    const TrainResult d = train_on(device, config, data, opt);
    ASSERT_EQ(c.losses.size(), d.losses.size());
    for (size_t e = 0; e < c.losses.size(); ++e)
        EXPECT_TRUE(close_scalar(c.losses[e], d.losses[e], e == 0 ? 1e-4 : 2e-3))
            << "epoch " << e + 1 << " loss cpu " << c.losses[e] << " device " << d.losses[e];
    ASSERT_EQ(c.parameters.size(), d.parameters.size());
    for (size_t p = 0; p < c.parameters.size(); ++p) {
        double mx = 0, diff = 0;
        for (size_t i = 0; i < c.parameters[p].size(); ++i) {
            mx = std::max(mx, double(std::fabs(c.parameters[p][i])));
            diff = std::max(diff, double(std::fabs(c.parameters[p][i] - d.parameters[p][i])));
        }
        EXPECT_LE(diff, 2e-3 * mx + 1e-6) << "parameter " << p;
    }
    // Scores, then top-K: every device pick has a CPU score within twice the row's largest score
    // difference of the CPU's K-th best.
    const size_t k = c.top.k, items = data.cols;
    size_t same = 0, slots = 0;
    for (uint64_t r = 0; r < c.top.rows; ++r) {
        double top = 0, diff = 0;
        for (size_t j = 0; j < items; ++j) {
            top = std::max(top, double(std::fabs(c.scores[r * items + j])));
            diff = std::max(diff,
                            double(std::fabs(c.scores[r * items + j] - d.scores[r * items + j])));
        }
        ASSERT_LE(diff, 2e-3 * top + 1e-7) << "scores of row " << r;
        for (size_t s = 0; s < k; ++s) {
            const uint32_t gi = d.top.indices[r * k + s], ci = c.top.indices[r * k + s];
            ++slots;
            if (gi == ci) ++same;
            if (ci == UINT32_MAX) {
                EXPECT_EQ(gi, UINT32_MAX) << "row " << r;
                continue;
            }
            ASSERT_NE(gi, UINT32_MAX) << "row " << r;
            const double kth = c.top.scores[r * k + (k - 1)];
            EXPECT_GE(double(c.scores[r * items + gi]), kth - 2 * diff - 1e-7)
                << "row " << r << " slot " << s;
        }
    }
    std::printf("top-%zu: %zu of %zu slots identical\n", k, same, slots);
    EXPECT_GE(double(same), 0.9 * double(slots));
}

TEST_F(CudaParity, TrainingAutoencoderAdamMatchesTheCpu) {
    OptimizerOptions opt;
    opt.kind = OptimizerKind::kAdam;
    opt.learning_rate = 0.003f;
    compare_training(parity_device(), testing::sparse_autoencoder_json().c_str(), opt);
}

TEST_F(CudaParity, TrainingSoftmaxNesterovLazyMatchesTheCpu) {
    OptimizerOptions opt;
    opt.kind = OptimizerKind::kNesterov;
    opt.learning_rate = 0.05f;
    opt.l2 = 1e-4f;
    opt.sparse_update = SparseUpdate::kLazy;
    compare_training(parity_device(), kSoftmaxNet, opt);
}

// Padded rows (engine::padded_ld) on the device: the same training with every row stride
// packed (StepSwitches::padded_ld off). cuBLAS picks other kernels for aligned leading dimensions,
// so the sums are not in the same order: the CPU-vs-device tolerances above (on the CPU the two
// layouts agree bit for bit: tests/engine/padded_ld_test.cpp).
TEST_F(CudaParity, PaddedRowsTrainAsPackedRows) {
    const Dataset data = parity_data();
    OptimizerOptions opt;
    opt.kind = OptimizerKind::kMomentum;
    opt.learning_rate = 0.05f;
    const TrainResult padded = train_on(parity_device(), kSoftmaxNet, data, opt);
    const TrainResult packed = train_on(parity_device(), kSoftmaxNet, data, opt, false);
    ASSERT_EQ(padded.losses.size(), packed.losses.size());
    for (size_t e = 0; e < padded.losses.size(); ++e)
        EXPECT_TRUE(close_scalar(packed.losses[e], padded.losses[e], 2e-3)) << "epoch " << e + 1;
    ASSERT_EQ(padded.parameters.size(), packed.parameters.size());
    for (size_t p = 0; p < padded.parameters.size(); ++p) {
        double mx = 0, diff = 0;
        for (size_t i = 0; i < packed.parameters[p].size(); ++i) {
            mx = std::max(mx, double(std::fabs(packed.parameters[p][i])));
            diff = std::max(diff,
                            double(std::fabs(packed.parameters[p][i] - padded.parameters[p][i])));
        }
        EXPECT_LE(diff, 2e-3 * mx + 1e-6) << "parameter " << p;
    }
    ASSERT_EQ(padded.scores.size(), packed.scores.size());
    double top = 0, diff = 0;
    for (size_t i = 0; i < packed.scores.size(); ++i) {
        top = std::max(top, double(std::fabs(packed.scores[i])));
        diff = std::max(diff, double(std::fabs(packed.scores[i] - padded.scores[i])));
    }
    EXPECT_LE(diff, 2e-3 * top + 1e-7);
}

}  // namespace
}  // namespace sparsenet::parity
