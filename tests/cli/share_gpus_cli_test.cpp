// `--share-gpus` and `--device` of train and predict, checked before any file is read: the flag
// parses (and changes nothing for one process), a value given to it or a misspelt device is a
// usage error naming the flag (exit 2). Each rank's GPU under mpirun: tests/cli/mpi_cli_test.cpp
// (the line each rank prints) and tests/backend/rank_device_test.cpp (the choice itself).
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

class ShareGpusCli : public ::testing::Test {
  protected:
    void SetUp() override {
        config_ = dir_.file("net.json");
        testing::write_file(config_, kConfig);
        data_ = dir_.file("data.nc");
        model_ = dir_.file("model.nc");
        ASSERT_EQ(run("generate -o " + data_ + " --users 60 --items 30 --nnz 300 --seed 3 -q"), 0)
            << out_;
    }
    int run(const std::string& args) {
        return testing::run_command(std::string(SPARSENET_CLI_PATH) + " " + args, &out_);
    }
    TempDir dir_;
    std::string config_, data_, model_, out_;
};

TEST_F(ShareGpusCli, TheFlagParsesAndOneProcessRunsAsWithoutIt) {
    const std::string train = "train -c " + config_ + " -i " + data_ + " -n " + model_ +
                              " -b 16 -e 1 --device auto --seed 5";
    ASSERT_EQ(run(train + " --share-gpus"), 0) << out_;
    const std::string with = out_;
    // One process: no rank line (the device auto line, when there is one, is the same).
    EXPECT_EQ(with.find("sparsenet: rank "), std::string::npos) << with;
    ASSERT_EQ(run("predict -n " + model_ + " --input " + data_ + " -k 3 -s " + dir_.file("r.txt") +
                  " --share-gpus"),
              0)
        << out_;
    EXPECT_EQ(out_.find("sparsenet: rank "), std::string::npos) << out_;
    // Both commands list it.
    for (const char* command : {"train", "predict"}) {
        ASSERT_EQ(run(std::string(command) + " --help"), 0) << out_;
        EXPECT_NE(out_.find("--share-gpus"), std::string::npos) << command << ": " << out_;
    }
}

TEST_F(ShareGpusCli, AValueForTheFlagIsRefusedNamingIt) {
    for (const char* value : {"yes", "1", "2"}) {
        EXPECT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model_ +
                      " --share-gpus=" + value),
                  2)
            << out_;
        EXPECT_NE(out_.find("option --share-gpus takes no value"), std::string::npos) << out_;
        EXPECT_EQ(run("predict -n " + model_ + " --input " + data_ + " --share-gpus=" + value), 2)
            << out_;
        EXPECT_NE(out_.find("option --share-gpus takes no value"), std::string::npos) << out_;
    }
}

TEST_F(ShareGpusCli, AnUnknownDeviceIsRefusedBeforeAnyFileIsRead) {
    // The config, the data and the model do not exist: the device is what is refused.
    const std::string missing = dir_.file("missing");
    for (const char* device : {"gpu", "cuda:x", "auto:1"}) {
        EXPECT_EQ(run("train -c " + missing + ".json -i " + missing + ".nc -n " + model_ +
                      " --share-gpus --device " + device),
                  2)
            << out_;
        EXPECT_NE(out_.find("option --device: unknown device '" + std::string(device) +
                            "': expected cpu, auto, cuda or cuda:N"),
                  std::string::npos)
            << out_;
        EXPECT_EQ(
            run("predict -n " + missing + ".nc --input " + missing + ".nc --device " + device), 2)
            << out_;
        EXPECT_NE(out_.find("option --device: unknown device"), std::string::npos) << out_;
    }
}

}  // namespace
}  // namespace sparsenet
