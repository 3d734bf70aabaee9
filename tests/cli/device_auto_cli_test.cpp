// `--device auto` (the default) says on stderr which backend it took and why, so a GPU machine
// whose CUDA setup is broken does not train on the CPU without a word; `--device cpu` says
// nothing.
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

TEST_F(DeviceAutoCli, TrainSaysWhichBackendAutoTookAndWhy) {
    const std::string model = dir_.file("model.nc");
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model + " -b 16 -e 1"), 0)
        << out_;
    const size_t at = out_.find("sparsenet: device auto -> ");
    ASSERT_NE(at, std::string::npos) << out_;
    const std::string line = out_.substr(at, out_.find('\n', at) - at);
    // Either the GPU, or the CPU with the reason (on this GPU-less builder: no CUDA device, with
    // the CUDA runtime's error).
    EXPECT_TRUE(line.rfind("sparsenet: device auto -> cuda:0 (", 0) == 0 ||
                line.rfind("sparsenet: device auto -> cpu (", 0) == 0)
        << line;
    EXPECT_EQ(line.back(), ')') << line;
    EXPECT_EQ(out_.find("device auto ->", at + line.size()), std::string::npos)
        << "said twice: " << out_;

    // Predicting with the model (also auto by default) says it too; --device cpu does not.
    ASSERT_EQ(run("predict -n " + model + " --input " + data_ + " -k 3 -s " + dir_.file("r.txt")),
              0)
        << out_;
    EXPECT_NE(out_.find("sparsenet: device auto -> "), std::string::npos) << out_;
    ASSERT_EQ(
        run("train -c " + config_ + " -i " + data_ + " -n " + model + " -b 16 -e 1 --device cpu"),
        0)
        << out_;
    EXPECT_EQ(out_.find("device auto"), std::string::npos) << out_;
}

}  // namespace
}  // namespace sparsenet
