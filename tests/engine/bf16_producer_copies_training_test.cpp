// BF16 copies of the activations and deltas that GEMMs read, written by the ops that produce
// them (issue 46; Network::Impl::keeps_act_bf16 / keeps_delta_bf16): under --precision bf16 on
// the CPU (an exact emulation) training with the copies is bit for bit training without them
// (StepSwitches::bf16_activation_copies off, where every BF16 GEMM rounds its FP32 operands
// itself): the same losses, weights and predictions. Every GEMM operand that carries a copy holds
// the rounding of its FP32 values at that moment (no stale copy), and where a later op changes the
// values (DeltaNorm's clip, later layers adding into an output layer's delta) no copy is kept.
// The memory plan counts the copies. (An output layer read by a later layer, whose delta would
// gain that layer's gradient after output_delta, keeps no copy either; the config refuses an
// Output as a Source or Skip today, so no network here reaches that case.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/network_impl.h"
#include "engine/small_network_util.h"
#include "formulas/precision.h"
#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::ScopedEnv;

std::string layers_json(const std::string& loss, const std::string& layers) {
    return R"({"Name": "copies", "ErrorFunction": ")" + loss + R"(", "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},)" +
           layers + "]}";
}

// dsstne-bench's shape, small: a sparse input, three Sigmoid layers with dropout 0.5, a Sigmoid
// output with ScaledMarginalCrossEntropy over 83 items (rows padded to 96).
std::string bench_like() {
    return layers_json("ScaledMarginalCrossEntropy", R"(
        {"Name": "H1", "Kind": "Hidden", "N": 32, "Activation": "Sigmoid", "pDropout": 0.5},
        {"Name": "H2", "Kind": "Hidden", "N": 32, "Activation": "Sigmoid", "pDropout": 0.5},
        {"Name": "H3", "Kind": "Hidden", "N": 24, "Activation": "Sigmoid", "pDropout": 0.5},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid", "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -2.0}})");
}

// A SoftMax output (multinomial CrossEntropy), Tanh with dropout, ReLU.
std::string softmax_net() {
    return layers_json("CrossEntropy", R"(
        {"Name": "H1", "Kind": "Hidden", "N": 24, "Activation": "Tanh", "pDropout": 0.2},
        {"Name": "H2", "Kind": "Hidden", "N": 20, "Activation": "RectifiedLinear"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "SoftMax"})");
}

// Where copies must be skipped: DeltaNorm on H2 and on the output (clip_rows rescales the delta
// after its producer), Skips of H1 into H2 and H3 (added into H1's dL/dA before H1's
// activation_backward writes its delta: H1 keeps its copy).
std::string delta_norm_skip_net() {
    return layers_json("ScaledMarginalCrossEntropy", R"(
        {"Name": "H1", "Kind": "Hidden", "N": 24, "Activation": "Sigmoid", "pDropout": 0.2},
        {"Name": "H2", "Kind": "Hidden", "N": 24, "Source": "H1", "Activation": "Tanh",
         "Skip": "H1", "DeltaNorm": 0.05},
        {"Name": "H3", "Kind": "Hidden", "N": 24, "Source": "H2", "Activation": "Sigmoid",
         "Skip": "H1"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Source": "H3",
         "Activation": "Sigmoid", "DeltaNorm": 0.02})");
}

// Every GEMM of a BF16 step: how many operands it read from a copy, and whether each copy held
// the rounding of its FP32 values (zeros in the padding of a zero_padded view).
struct Audit {
    size_t gemms = 0, operands = 0, copies = 0, stale = 0;
};

bool current(const ConstMatrixView& v) {
    for (size_t r = 0; r < v.rows; ++r) {
        for (size_t j = 0; j < v.cols; ++j)
            if (v.bf16[r * v.ld + j] != formulas::bf16_bits(v.data[r * v.ld + j])) return false;
        for (size_t j = v.cols; v.zero_padded && j < v.ld; ++j)
            if (v.bf16[r * v.ld + j] != 0) return false;
    }
    return true;
}

void audit(const GemmCall& call, void* context) {
    Audit& a = *static_cast<Audit*>(context);
    if (call.backend->precision() != Precision::kBf16) return;
    ++a.gemms;
    for (const ConstMatrixView* v : {&call.a, &call.b}) {
        ++a.operands;
        if (v->bf16 == nullptr) continue;
        ++a.copies;
        a.stale += !current(*v);
    }
}

struct TrainedRun {
    std::vector<double> losses;
    std::vector<std::vector<float>> parameters;
    std::vector<float> scores;
    Audit audit;
    std::vector<bool> act_copies, delta_copies;  // by layer, as the network held them
};

TrainedRun train(const std::string& json, const OptimizerOptions& optimizer, bool copies,
                 Precision precision = Precision::kBf16) {
    StepSwitches switches;
    switches.bf16_activation_copies = copies;
    const Dataset in = testing::planted("in"), out = testing::planted("out");
    Network net = testing::make_network(json, switches);
    net.set_precision(precision);
    TrainOptions o;
    o.epochs = 2;
    o.batch = 32;
    o.seed = 3;
    o.optimizer = optimizer;
    Trainer trainer(net, {{"in", &in}, {"out", &out}}, o);
    TrainedRun r;
    set_gemm_observer(audit, &r.audit);
    for (const EpochStats& e : trainer.fit()) r.losses.push_back(e.loss);
    set_gemm_observer(nullptr, nullptr);
    for (const Parameter& p : net.parameters()) r.parameters.push_back(net.get_parameter(p.name));
    const Network::Impl& impl = net.impl();
    for (const engine::LayerBuffers& b : impl.buffers.layers) {
        r.act_copies.push_back(b.act_bf16.size() > 0);
        r.delta_copies.push_back(b.delta_bf16.size() > 0);
    }
    Predictor predictor(net, {{"in", &in}});
    r.scores = predictor.scores(0, uint32_t(in.rows));
    return r;
}

void expect_identical(const TrainedRun& with, const TrainedRun& without) {
    EXPECT_EQ(with.losses, without.losses);
    ASSERT_EQ(with.parameters.size(), without.parameters.size());
    for (size_t p = 0; p < with.parameters.size(); ++p)
        EXPECT_EQ(with.parameters[p], without.parameters[p]) << "parameter " << p;
    EXPECT_EQ(with.scores, without.scores);
    EXPECT_EQ(with.audit.gemms, without.audit.gemms);
    EXPECT_EQ(with.audit.stale, 0u);
    EXPECT_EQ(without.audit.stale, 0u);
    EXPECT_LT(with.losses.back(), with.losses.front());  // it learned
}

using testing::optimizer;

TEST(Bf16ProducerCopies, BenchLikeTrainingIsBitForBitWithoutThemAndEveryGemmReadsCopies) {
    for (const OptimizerOptions& opt :
         {optimizer(OptimizerKind::kSgd, 0.5f, 0.001f), optimizer(OptimizerKind::kAdam, 0.01f)}) {
        SCOPED_TRACE(to_string(opt.kind));
        const TrainedRun with = train(bench_like(), opt, true);
        const TrainedRun without = train(bench_like(), opt, false);
        expect_identical(with, without);
        // Every operand of every GEMM reads a copy: the weights' (EdgeParams::w_bf16), and the
        // hidden activations, the hidden deltas and the output delta from their producers.
        EXPECT_GT(with.audit.gemms, 50u);
        EXPECT_EQ(with.audit.copies, with.audit.operands);
        // Without the producers' copies, only the weights' (one operand of the forward and
        // input-delta GEMMs; none of the weight-gradient GEMMs).
        EXPECT_LT(without.audit.copies, without.audit.operands / 2);
        // Input, H1 (its delta feeds csr_weight_grad only), H2, H3, Output (no edge out).
        EXPECT_EQ(with.act_copies, (std::vector<bool>{false, true, true, true, false}));
        EXPECT_EQ(with.delta_copies, (std::vector<bool>{false, false, true, true, true}));
        EXPECT_EQ(without.act_copies, std::vector<bool>(5, false));
        EXPECT_EQ(without.delta_copies, std::vector<bool>(5, false));
        // FP32 keeps none.
        const TrainedRun fp32 = train(bench_like(), opt, true, Precision::kFp32);
        EXPECT_EQ(fp32.act_copies, std::vector<bool>(5, false));
        EXPECT_EQ(fp32.delta_copies, std::vector<bool>(5, false));
        EXPECT_NE(fp32.parameters, with.parameters);  // bf16 is in effect
    }
}

TEST(Bf16ProducerCopies, SoftMaxOutputTrainingIsBitForBitWithoutThem) {
    const OptimizerOptions opt = optimizer(OptimizerKind::kMomentum, 0.1f);
    const TrainedRun with = train(softmax_net(), opt, true);
    const TrainedRun without = train(softmax_net(), opt, false);
    expect_identical(with, without);
    EXPECT_EQ(with.audit.copies, with.audit.operands);
    EXPECT_EQ(with.delta_copies, (std::vector<bool>{false, false, true, true}));
}

TEST(Bf16ProducerCopies, DeltaNormAndSkipsKeepNoCopyWhereALaterOpChangesTheValues) {
    const OptimizerOptions opt = optimizer(OptimizerKind::kSgd, 0.5f);
    const TrainedRun with = train(delta_norm_skip_net(), opt, true);
    const TrainedRun without = train(delta_norm_skip_net(), opt, false);
    expect_identical(with, without);
    // Input, H1, H2, H3, Output: H2's and the output's deltas are clipped after their producers
    // (no copy; their GEMMs convert the FP32 deltas); H1's delta gains both Skips before its
    // activation_backward (a copy, although no GEMM reads it: its only edge is the sparse one).
    EXPECT_EQ(with.act_copies, (std::vector<bool>{false, true, true, true, false}));
    EXPECT_EQ(with.delta_copies, (std::vector<bool>{false, false, false, true, false}));
    EXPECT_GT(with.audit.copies, without.audit.copies);
    EXPECT_LT(with.audit.copies, with.audit.operands);
}

// The memory plan counts 2 B per value of each copy, batch x ld, as sync_activation_copies
// allocates them.
TEST(Bf16ProducerCopies, TheMemoryPlanCountsTheCopies) {
    const NetworkConfig config = NetworkConfig::from_json(bench_like());
    DatasetShape s;
    s.rows = s.examples = 300;
    s.cols = 83;
    s.nnz = 4000;
    s.name = "in";
    DatasetShape t = s;
    t.name = "out";
    const std::map<std::string, DatasetShape> shapes{{"in", s}, {"out", t}};
    const OptimizerOptions sgd;
    const MemoryPlan fp32 = plan_memory(config, shapes, 1, 32, sgd, 0.0f);
    const MemoryPlan bf16 = plan_memory(config, shapes, 1, 32, sgd, 0.0f, false, Precision::kBf16);
    EXPECT_EQ(fp32.bf16_activations, 0.0);
    // H1, H2, H3 activations (ld 32), H2 and H3 deltas (ld 32), the output's delta (ld 96).
    EXPECT_EQ(bf16.bf16_activations, 2.0 * 32 * (5 * 32 + 96));
    EXPECT_EQ(bf16.device_bytes(), fp32.device_bytes() + bf16.bf16_weights + bf16.bf16_activations);
    EXPECT_NE(describe_memory(bf16, false).find("BF16 activation and delta copies"),
              std::string::npos);
    StepSwitches off;
    off.bf16_activation_copies = false;
    EXPECT_EQ(plan_memory(config, shapes, 1, 32, sgd, 0.0f, false, Precision::kBf16, off)
                  .bf16_activations,
              0.0);
}

}  // namespace
}  // namespace sparsenet
