// `sparsenet train` with a Training section in the config: the file alone fixes the run, and
// each command-line flag overrides its key. A one-weight network (output = w + b, L2 loss,
// target 2) makes every run computable here by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::TempDir;

std::string config_with(const std::string& training) {
    return R"({ "Name": "one", "ErrorFunction": "L2", )" + training + R"(
      "Layers": [
        { "Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true },
        { "Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Activation": "Linear",
          "WeightInit": { "Scheme": "Constant", "Scale": 0.5, "Bias": 0.25 } } ] })";
}

// Momentum on the single example: w and b get the same update, w + b starts at 0.75.
struct Expected {
    double w, b;
};
Expected momentum(double alpha, double mu, int steps, double decay = 0.0) {
    double w = 0.5, b = 0.25, v = 0.0;
    for (int t = 1; t <= steps; ++t) {
        const double delta = w + b - 2.0;
        v = mu * v - alpha / (1.0 + decay * (t - 1)) * delta;
        w += v;
        b += v;
    }
    return {w, b};
}

class TrainOptionsCli : public ::testing::Test {
  protected:
    void SetUp() override {
        Dataset x;
        x.name = "x";
        x.rows = 1;
        x.cols = 1;
        x.offsets = {0, 1};
        x.indices = {0};
        Dataset y = x;
        y.name = "y";
        y.values = {2.0f};
        data_ = dir_.file("data.nc");
        write_datasets(data_, {x, y});
        config_ = dir_.file("net.json");
        model_ = dir_.file("model.nc");
        metrics_ = dir_.file("metrics.jsonl");
    }

    // Trains with the given Training section and flags; returns (w, b) from the model file and
    // the number of epochs reported.
    Expected train(const std::string& training, const std::string& flags, int* epochs) {
        testing::write_file(config_, config_with(training));
        std::filesystem::remove(model_);
        std::filesystem::remove(metrics_);
        std::string out;
        const int rc = testing::run_command(
            std::string(SPARSENET_CLI_PATH) + " train -c " + config_ + " -i " + data_ + " -n " +
                model_ + " --device cpu --metrics-out " + metrics_ + " " + flags + " -q",
            &out);
        EXPECT_EQ(rc, 0) << out;
        const std::string metrics = testing::read_file(metrics_);
        *epochs = int(std::count(metrics.begin(), metrics.end(), '\n'));
        NetworkOptions no;
        no.device = "cpu";
        const Network net = Network::load(model_, no);
        return {net.get_parameter("weight:In->Out")[0], net.get_parameter("bias:Out")[0]};
    }

    TempDir dir_;
    std::string data_, config_, model_, metrics_;
};

const char* kSection = R"("Training": { "Optimizer": "Momentum", "Alpha": 0.3, "Mu": 0.5,
    "Epochs": 4, "BatchSize": 1, "Seed": 3 },)";

TEST_F(TrainOptionsCli, TheTrainingSectionAloneFixesTheRun) {
    int epochs = 0;
    const Expected got = train(kSection, "", &epochs);
    EXPECT_EQ(epochs, 4);
    const Expected want = momentum(0.3, 0.5, 4);
    EXPECT_NEAR(got.w, want.w, 1e-5);
    EXPECT_NEAR(got.b, want.b, 1e-5);
    // By hand, the first two steps: v = 0.375 then 0.5 * 0.375 + 0.3 * 0.5 = 0.3375.
    const Expected two = momentum(0.3, 0.5, 2);
    EXPECT_NEAR(two.w, 0.5 + 0.375 + 0.3375, 1e-12);
}

TEST_F(TrainOptionsCli, FlagsOverrideTheirKeysOnly) {
    int epochs = 0;
    // -alpha and -e override; Optimizer, Mu, BatchSize and Seed still come from the file.
    Expected got = train(kSection, "-alpha 0.1 -e 2", &epochs);
    EXPECT_EQ(epochs, 2);
    Expected want = momentum(0.1, 0.5, 2);  // v = 0.125, then 0.0625 + 0.1 = 0.1625
    EXPECT_NEAR(got.w, want.w, 1e-5);
    EXPECT_NEAR(got.w, 0.5 + 0.125 + 0.1625, 1e-5);
    EXPECT_NEAR(got.b, want.b, 1e-5);

    // -mu (DSSTNE's flag) overrides Mu; --decay overrides the top-level Decay.
    got = train(std::string(R"("Decay": 5.0,)") + kSection, "-mu 0.25 --decay 1", &epochs);
    EXPECT_EQ(epochs, 4);
    want = momentum(0.3, 0.25, 4, 1.0);
    EXPECT_NEAR(got.w, want.w, 1e-5);
    // Without --decay the file's Decay applies.
    got = train(std::string(R"("Decay": 5.0,)") + kSection, "", &epochs);
    want = momentum(0.3, 0.5, 4, 5.0);
    EXPECT_NEAR(got.w, want.w, 1e-5);

    // --optimizer sgd overrides Optimizer: plain steps of alpha * delta.
    got = train(kSection, "--optimizer sgd -e 1", &epochs);
    EXPECT_EQ(epochs, 1);
    EXPECT_NEAR(got.w, 0.5 + 0.3 * 1.25, 1e-6);  // 0.875
}

TEST_F(TrainOptionsCli, WithoutSectionOrFlagsTheDefaultsApply) {
    int epochs = 0;
    // Defaults: SGD, alpha 0.025, 40 epochs (one batch each).
    const Expected got = train("", "", &epochs);
    EXPECT_EQ(epochs, 40);
    double w = 0.5, b = 0.25;
    for (int t = 0; t < 40; ++t) {
        const double delta = w + b - 2.0;
        w -= 0.025 * delta;
        b -= 0.025 * delta;
    }
    EXPECT_NEAR(got.w, w, 1e-5);
    EXPECT_NEAR(got.b, b, 1e-5);
}

// --steps N stops after the run's N-th optimizer step, in the middle of an epoch too, and writes
// the model of that step.
TEST_F(TrainOptionsCli, StepsStopsAfterTheNthStep) {
    int epochs = 0;
    Expected got = train(kSection, "--steps 3", &epochs);  // one step an epoch
    EXPECT_EQ(epochs, 3);
    Expected want = momentum(0.3, 0.5, 3);
    EXPECT_NEAR(got.w, want.w, 1e-5);
    EXPECT_NEAR(got.b, want.b, 1e-5);

    // Four identical examples, batch 1: four steps an epoch; the 6th is in the second epoch,
    // which ends there (reported, as a partial epoch is).
    Dataset x;
    x.name = "x";
    x.rows = 4;
    x.cols = 1;
    x.offsets = {0, 1, 2, 3, 4};
    x.indices = {0, 0, 0, 0};
    Dataset y = x;
    y.name = "y";
    y.values = {2.0f, 2.0f, 2.0f, 2.0f};
    write_datasets(data_, {x, y});
    got = train(kSection, "--steps 6", &epochs);
    EXPECT_EQ(epochs, 2);
    const std::string metrics = testing::read_file(metrics_);
    EXPECT_NE(metrics.find("\"examples\": 2, "), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("\"complete\": false"), std::string::npos) << metrics;
    want = momentum(0.3, 0.5, 6);
    EXPECT_NEAR(got.w, want.w, 1e-5);
    EXPECT_NEAR(got.b, want.b, 1e-5);
    // More steps than the epochs hold: -e wins.
    got = train(kSection, "--steps 100 -e 2", &epochs);
    EXPECT_EQ(epochs, 2);
    EXPECT_NEAR(got.w, momentum(0.3, 0.5, 8).w, 1e-5);

    testing::write_file(config_, config_with(kSection));
    std::string out;
    const int rc = testing::run_command(std::string(SPARSENET_CLI_PATH) + " train -c " + config_ +
                                            " -i " + data_ + " -n " + model_ + " --steps 0",
                                        &out);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("option --steps: must be positive"), std::string::npos) << out;
}

TEST_F(TrainOptionsCli, BadSectionValuesAreConfigErrors) {
    testing::write_file(config_, config_with(R"("Training": { "Mu": 2 },)"));
    std::string out;
    const int rc = testing::run_command(
        std::string(SPARSENET_CLI_PATH) + " train -c " + config_ + " -i " + data_ + " -n " + model_,
        &out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("$.Training.Mu"), std::string::npos) << out;
    EXPECT_FALSE(std::filesystem::exists(model_));
}

// SPARSENET_OP_TIMES=1 (docs/benchmarks.md): at exit, the time and calls of each op the run
// used, on stderr; nothing without it. The one-weight network runs csr_matmul (forward),
// output_epilogue (its training step's output), column_sum and the optimizer steps.
TEST_F(TrainOptionsCli, OpTimesArePrintedOnRequestOnly) {
    testing::write_file(config_, config_with(kSection));
    const std::string train = std::string(SPARSENET_CLI_PATH) + " train -c " + config_ + " -i " +
                              data_ + " -n " + model_ + " --device cpu -e 2 -q";
    std::string out;
    ASSERT_EQ(testing::run_command("SPARSENET_OP_TIMES=1 " + train, &out), 0) << out;
    EXPECT_NE(out.find("sparsenet op times (SPARSENET_OP_TIMES)"), std::string::npos) << out;
    for (const char* op : {"csr_matmul", "output_epilogue", "column_sum", "optimizer_step"}) {
        EXPECT_NE(out.find(std::string("  ") + op + " "), std::string::npos) << op << "\n" << out;
    }
    EXPECT_NE(out.find(" 2 calls"), std::string::npos) << out;  // one step per epoch
    EXPECT_EQ(out.find("gemm"), std::string::npos) << out;      // no dense layer: not listed
    std::filesystem::remove(model_);
    ASSERT_EQ(testing::run_command(train, &out), 0) << out;
    EXPECT_EQ(out.find("op times"), std::string::npos) << out;
}

// --precision on train, predict, evaluate and serve: a bad value is a usage error naming the flag
// (before any file is read); the flag is not written into the model; predict --compare-fp32
// reports the share of rows whose top-K differs from fp32's (none when it scores in fp32);
// predict --bf16-weights-only writes what bf16 writes with the FP32 weights, and is refused
// outside bf16.
TEST_F(TrainOptionsCli, PrecisionFlag) {
    const std::string cli = SPARSENET_CLI_PATH;
    std::string out;
    for (const std::string& cmd :
         {" train -c " + config_ + " -i " + data_ + " -n " + model_,
          " predict -n " + model_ + " --input " + data_,
          " evaluate -n " + model_ + " --input " + data_ + " --heldout " + data_,
          " serve -n " + model_ + " --port 0"}) {
        EXPECT_EQ(testing::run_command(cli + cmd + " --precision fp16", &out), 2) << out;
        EXPECT_NE(out.find("option --precision: precision 'fp16' is unknown; expected fp32, tf32 "
                           "or bf16"),
                  std::string::npos)
            << cmd << ": " << out;
        EXPECT_EQ(out.find("No such file"), std::string::npos) << out;
    }
    EXPECT_FALSE(std::filesystem::exists(model_));

    int epochs = 0;
    train(kSection, "--precision bf16", &epochs);
    EXPECT_EQ(epochs, 4);
    NetworkOptions no;
    no.device = "cpu";
    EXPECT_EQ(Network::load(model_, no).precision(), Precision::kFp32);  // the flag is not kept

    for (const char* p : {"fp32", "bf16"}) {
        ASSERT_EQ(testing::run_command(cli + " predict -n " + model_ + " --input " + data_ +
                                           " --keep-input -k 1 --device cpu --compare-fp32 "
                                           "--precision " +
                                           p + " -s " + dir_.file("recs.txt"),
                                       &out),
                  0)
            << out;
        EXPECT_NE(out.find(std::string("predict: the ") + p + " top-1 differs from fp32's in "),
                  std::string::npos)
            << out;
        if (std::string(p) == "fp32") {
            EXPECT_NE(out.find("in 0.00 % of rows (0 of 1; as sets of items: 0.00 %)"),
                      std::string::npos)
                << out;
        }
    }

    const std::string predict = cli + " predict -n " + model_ + " --input " + data_ +
                                " --keep-input -k 5 --device cpu --precision ";
    ASSERT_EQ(testing::run_command(predict + "bf16 -s " + dir_.file("both.txt"), &out), 0) << out;
    ASSERT_EQ(testing::run_command(predict + "bf16 --bf16-weights-only -s " + dir_.file("only.txt"),
                                   &out),
              0)
        << out;
    EXPECT_EQ(testing::read_file(dir_.file("only.txt")), testing::read_file(dir_.file("both.txt")));
    EXPECT_EQ(
        testing::run_command(predict + "fp32 --bf16-weights-only -s " + dir_.file("no.txt"), &out),
        2)
        << out;
    EXPECT_NE(out.find("keeping only the BF16 weights needs precision bf16"), std::string::npos)
        << out;
}

// The kernel of the CPU's BF16 GEMMs (src/backend/cpu/bf16_matmul.h): train and predict name it on
// stderr (even with -q); ONEDNN_MAX_CPU_ISA=AVX2 (a CPU without BF16 instructions) runs the
// emulation, bit for bit what SPARSENET_CPU_BF16_KERNEL=emulation trains; a bad value of the
// variable is refused by name.
TEST_F(TrainOptionsCli, Bf16KernelIsNamedAndTheFallbackIsTheEmulation) {
    const std::string cli = SPARSENET_CLI_PATH;
    const std::string data = dir_.file("gen.nc");
    std::string out;
    ASSERT_EQ(
        testing::run_command(
            cli + " generate -o " + data + " --users 96 --items 40 --nnz 900 --seed 1 -q", &out),
        0)
        << out;
    testing::write_file(config_, R"({ "Name": "ae", "ErrorFunction": "CrossEntropy",
      "Layers": [
        { "Name": "In", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true },
        { "Name": "H", "Kind": "Hidden", "N": 24, "Activation": "Sigmoid" },
        { "Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
          "Activation": "Sigmoid" } ] })");
    const auto train = [&](const std::string& env, const std::string& precision,
                           const std::string& model) {
        const int rc = testing::run_command(
            env + " " + cli + " train -c " + config_ + " -i " + data + " -n " + model +
                " --device cpu --threads 2 -b 16 -e 2 -q --precision " + precision,
            &out);
        EXPECT_EQ(rc, 0) << out;
        NetworkOptions no;
        no.device = "cpu";
        return Network::load(model, no).get_parameter("weight:H->Out");
    };
    const auto fallback = train("ONEDNN_MAX_CPU_ISA=AVX2", "bf16", dir_.file("avx2.nc"));
    EXPECT_NE(out.find("train: bf16 GEMMs -> emulation"), std::string::npos) << out;
    const auto emulated =
        train("SPARSENET_CPU_BF16_KERNEL=emulation", "bf16", dir_.file("emulated.nc"));
    EXPECT_NE(out.find("train: bf16 GEMMs -> emulation (SPARSENET_CPU_BF16_KERNEL=emulation"),
              std::string::npos)
        << out;
    EXPECT_EQ(fallback, emulated);
    const auto chosen = train("", "bf16", dir_.file("chosen.nc"));
    const bool onednn = out.find("train: bf16 GEMMs -> onednn") != std::string::npos;
    EXPECT_TRUE(onednn || out.find("train: bf16 GEMMs -> emulation") != std::string::npos) << out;
    // oneDNN's sums may run in another order: the same weights within rounding (at these small
    // inner extents often bit for bit).
    ASSERT_EQ(chosen.size(), emulated.size());
    for (size_t i = 0; i < chosen.size(); ++i) {
        if (onednn) {
            EXPECT_NEAR(chosen[i], emulated[i], 1e-5) << i;
        } else {
            EXPECT_EQ(chosen[i], emulated[i]) << i;
        }
    }
    train("", "fp32", dir_.file("fp32.nc"));
    EXPECT_EQ(out.find("bf16 GEMMs"), std::string::npos) << out;
    ASSERT_EQ(
        testing::run_command(cli + " predict -n " + dir_.file("chosen.nc") + " --input " + data +
                                 " -k 3 --device cpu --precision bf16 -s " + dir_.file("recs.txt"),
                             &out),
        0)
        << out;
    EXPECT_NE(out.find("predict: bf16 GEMMs -> "), std::string::npos) << out;
    EXPECT_EQ(testing::run_command("SPARSENET_CPU_BF16_KERNEL=fast " + cli + " train -c " +
                                       config_ + " -i " + data + " -n " + dir_.file("bad.nc") +
                                       " --device cpu -q --precision bf16",
                                   &out),
              2)
        << out;
    EXPECT_NE(out.find("SPARSENET_CPU_BF16_KERNEL: expected auto, onednn or emulation, got 'fast'"),
              std::string::npos)
        << out;
}

}  // namespace
}  // namespace sparsenet
