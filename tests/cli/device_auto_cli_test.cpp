// `--device auto` (the default) says on stderr which backend it took and why when that matters: a
// GPU taken, or the CPU taken although the machine has an NVIDIA GPU (a broken CUDA setup must not
// train on the CPU without a word). On a machine without a GPU the CPU is the expected choice:
// said only with --verbose. `--device cpu` says nothing.
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::TempDir;

constexpr const char* kConfig = R"({"Kind": "FeedForward", "Name": "ae",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 8, "Activation": "Sigmoid"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
     "Activation": "Sigmoid"}
  ]})";

class DeviceAutoCli : public ::testing::Test {
  protected:
    void SetUp() override {
        config_ = dir_.file("net.json");
        testing::write_file(config_, kConfig);
        data_ = dir_.file("data.nc");
        ASSERT_EQ(run("generate -o " + data_ + " --users 60 --items 30 --nnz 300 --seed 3 -q"), 0)
            << out_;
    }
    int run(const std::string& args) {
        return testing::run_command(std::string(SPARSENET_CLI_PATH) + " " + args, &out_);
    }
    TempDir dir_;
    std::string config_, data_, out_;
};

// The line "sparsenet: device auto -> ..." of out, "" when there is none; fails if it is there
// twice.
std::string auto_line(const std::string& out) {
    const size_t at = out.find("sparsenet: device auto -> ");
    if (at == std::string::npos) return "";
    const std::string line = out.substr(at, out.find('\n', at) - at);
    EXPECT_EQ(out.find("device auto ->", at + line.size()), std::string::npos)
        << "said twice: " << out;
    return line;
}

TEST_F(DeviceAutoCli, VerboseSaysWhichBackendAutoTookAndWhy) {
    const std::string model = dir_.file("model.nc");
    ASSERT_EQ(
        run("train -c " + config_ + " -i " + data_ + " -n " + model + " -b 16 -e 1 --verbose"), 0)
        << out_;
    const std::string verbose = auto_line(out_);
    // Either the GPU, or the CPU with the reason: no GPU on this machine (on a GPU-less builder,
    // with the CUDA runtime's words after it), or one that is there but cannot be used.
    EXPECT_TRUE(verbose.rfind("sparsenet: device auto -> cuda:0 (", 0) == 0 ||
                verbose.rfind("sparsenet: device auto -> cpu (no NVIDIA GPU found", 0) == 0 ||
                verbose.rfind("sparsenet: device auto -> cpu (an NVIDIA GPU is present", 0) == 0)
        << out_;
    EXPECT_EQ(verbose.back(), ')') << verbose;

    // Without --verbose: the same line, except on a machine without a GPU, where the CPU is
    // the expected choice and nothing is said.
    const bool no_gpu = verbose.find("(no NVIDIA GPU found") != std::string::npos;
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model + " -b 16 -e 1"), 0)
        << out_;
    EXPECT_EQ(auto_line(out_), no_gpu ? "" : verbose) << out_;
    if (no_gpu) {
        EXPECT_EQ(out_.find("cudaGetDeviceCount"), std::string::npos) << out_;
    }

    // predict and evaluate (auto by default too) do the same; --device cpu says nothing.
    const std::string recs = dir_.file("r.txt");
    ASSERT_EQ(run("predict -n " + model + " --input " + data_ + " -k 3 -s " + recs + " -v"), 0)
        << out_;
    EXPECT_EQ(auto_line(out_), verbose) << out_;
    ASSERT_EQ(run("predict -n " + model + " --input " + data_ + " -k 3 -s " + recs), 0) << out_;
    EXPECT_EQ(auto_line(out_), no_gpu ? "" : verbose) << out_;
    ASSERT_EQ(run("evaluate -n " + model + " --input " + data_ + " --heldout " + data_ +
                  " -k 3 --verbose"),
              0)
        << out_;
    EXPECT_EQ(auto_line(out_), verbose) << out_;
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model +
                  " -b 16 -e 1 --device cpu --verbose"),
              0)
        << out_;
    EXPECT_EQ(out_.find("device auto"), std::string::npos) << out_;
}

}  // namespace
}  // namespace sparsenet
