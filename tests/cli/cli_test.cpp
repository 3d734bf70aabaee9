// The sparsenet command line, end to end: the happy path and bad input. Bad input must exit
// non-zero with a message naming the file (or flag) and what was wrong, and leave no output.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <sstream>

#include "sparsenet/dataset.h"
#include "support/test_support.h"
#include "test_configs.h"

namespace sparsenet {
namespace {

using testing::TempDir;

// The small autoencoder the CLI tests train (tests/data/configs/cli_autoencoder.json).
const char* kConfig = kCliAutoencoderJson;

class Cli : public ::testing::Test {
  protected:
    void SetUp() override {
        config_ = dir_.file("net.json");
        testing::write_file(config_, kConfig);
        data_ = dir_.file("data.nc");
        heldout_ = dir_.file("heldout.nc");
        ASSERT_EQ(run("generate -o " + data_ + " --users 120 --items 40 --nnz 900 --seed 2 " +
                      "--holdout 0.2 --heldout-output " + heldout_ + " -q"),
                  0)
            << out_;
        model_ = dir_.file("model.nc");
    }

    int run(const std::string& args) {
        return testing::run_command(std::string(SPARSENET_CLI_PATH) + " " + args, &out_);
    }

    void expect_failure(const std::string& args, const std::vector<std::string>& mentions,
                        int code = 1) {
        const int rc = run(args);
        EXPECT_EQ(rc, code) << args << "\n" << out_;
        for (const std::string& m : mentions) {
            EXPECT_NE(out_.find(m), std::string::npos) << "missing '" << m << "' in: " << out_;
        }
    }

    TempDir dir_;
    std::string config_, data_, heldout_, model_, out_;
};

TEST_F(Cli, TrainPredictEvaluateRoundTrip) {
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model_ +
                  " -b 16 -e 2 --optimizer adam --learning-rate 0.01 --metrics-out " +
                  dir_.file("m.jsonl")),
              0)
        << out_;
    EXPECT_NE(out_.find("epoch 2/2"), std::string::npos) << out_;
    const std::string metrics = testing::read_file(dir_.file("m.jsonl"));
    EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 2) << metrics;
    EXPECT_NE(metrics.find("\"epoch\": 2"), std::string::npos);

    const std::string recs = dir_.file("recs.txt");
    ASSERT_EQ(run("predict -n " + model_ + " --input " + data_ + " -k 5 -s " + recs), 0) << out_;
    const Dataset train = Dataset::read(data_, "gl_input");
    std::istringstream lines(testing::read_file(recs));
    std::string line;
    uint64_t row = 0;
    for (; std::getline(lines, line); ++row) {
        const size_t tab = line.find('\t');
        ASSERT_NE(tab, std::string::npos) << line;
        EXPECT_EQ(line.substr(0, tab), std::to_string(row));
        std::istringstream items(line.substr(tab + 1));
        std::string item;
        int count = 0;
        while (std::getline(items, item, ':')) {
            const uint32_t id = std::stoul(item.substr(0, item.find(',')));
            const auto first = train.indices.begin() + train.offsets[row];
            const auto last = train.indices.begin() + train.offsets[row + 1];
            EXPECT_FALSE(std::binary_search(first, last, id)) << "row " << row << " item " << id;
            ++count;
        }
        EXPECT_EQ(count, 5) << line;
    }
    EXPECT_EQ(row, 120u);

    ASSERT_EQ(run("evaluate -n " + model_ + " --input " + data_ + " --heldout " + heldout_ +
                  " -k 10 --popularity"),
              0)
        << out_;
    EXPECT_NE(out_.find("Recall@10"), std::string::npos) << out_;
    EXPECT_NE(out_.find("popularity"), std::string::npos) << out_;
}

TEST_F(Cli, DsstneShortFlagsAreAccepted) {
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -o " + data_ + " -n " + model_ +
                  " -b 32 -e 1 -alpha 0.05 -mu 0.5 -lambda 0.0001 --optimizer momentum -q"),
              0)
        << out_;
    ASSERT_EQ(run("predict -n " + model_ + " --input " + data_ + " -k 3 -b 7"), 0) << out_;
}

TEST_F(Cli, MissingConfigFileNamesTheFile) {
    expect_failure("train -c " + dir_.file("nope.json") + " -i " + data_ + " -n " + model_,
                   {"nope.json"});
    EXPECT_FALSE(std::filesystem::exists(model_));
}

TEST_F(Cli, MalformedJsonNamesFileAndLine) {
    testing::write_file(config_, "{\n  \"Version\": 0.9,\n  \"Layers\": [ \n");
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + model_, {"net.json", "Line"});
    EXPECT_FALSE(std::filesystem::exists(model_));
}

TEST_F(Cli, UnknownConfigKeyNamesThePath) {
    std::string text = kConfig;
    text.replace(text.find("\"Sparse\": true"), 14, "\"Sparse\": true, \"Colour\": 3");
    testing::write_file(config_, text);
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + model_,
                   {"net.json", "$.Layers[0]", "Colour"});
}

TEST_F(Cli, NotImplementedKeyIsNamed) {
    std::string text = kConfig;
    text.replace(text.find("\"Sparse\": true"), 14, "\"Sparse\": true, \"Kernel\": 3");
    testing::write_file(config_, text);
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + model_,
                   {"not implemented yet: Kernel"});
}

TEST_F(Cli, CorruptDatasetNamesTheFile) {
    const std::string bad = dir_.file("bad.nc");
    testing::write_file(bad, "this is not netCDF at all");
    expect_failure("train -c " + config_ + " -i " + bad + " -n " + model_, {"bad.nc"});
    // A truncated copy of a valid file.
    const std::string whole = testing::read_file(data_);
    testing::write_file(bad, whole.substr(0, whole.size() / 2));
    expect_failure("train -c " + config_ + " -i " + bad + " -n " + model_, {"bad.nc"});
    EXPECT_FALSE(std::filesystem::exists(model_));
}

TEST_F(Cli, MissingDatasetIsNamed) {
    std::string text = kConfig;
    text.replace(text.find("gl_output"), 9, "gl_target");
    testing::write_file(config_, text);
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + model_, {"gl_target"});
}

TEST_F(Cli, BadFlagsAreUsageErrors) {
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + model_ + " -b abc",
                   {"-b", "abc"}, 2);
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + model_ + " --frobnicate",
                   {"--frobnicate"}, 2);
    expect_failure("train -i " + data_ + " -n " + model_, {"-c"}, 2);
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + model_ + " --optimizer adamax",
                   {"adamax", "rmsprop"}, 2);
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + model_ + " -mu 1.5",
                   {"mu", "1.5", "[0, 1)"}, 2);
    expect_failure(
        "train -c " + config_ + " -i " + data_ + " -n " + model_ + " --sparse-updates eager",
        {"eager", "exact, lazy"}, 2);
    expect_failure("frobnicate", {"unknown command"}, 2);
}

TEST_F(Cli, PredictOnANonModelFileSaysSo) {
    expect_failure("predict -n " + data_ + " --input " + data_, {"data.nc", "model"});
    expect_failure("predict -n " + dir_.file("missing.nc") + " --input " + data_, {"missing.nc"});
}

// The load's overlap (issue 45, item 3: the device's start and the model's read-ahead on threads
// while the datasets are read): --timings prints its parts, the recs are those of a run without
// --timings byte for byte, and a bad dataset or a bad model (whole, or its weights cut off) is
// still the error that names its file; with both bad, the first read's (the model's header,
// then the datasets, then the weights: the order of the reads, never of the threads; a model
// cut short fails at its header, HDF5's end-of-file address being past the file's end).
TEST_F(Cli, PredictLoadsInParallelWithTheSameResultsAndErrors) {
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model_ + " -b 16 -e 1 -q"), 0)
        << out_;
    const std::string plain = dir_.file("plain.txt"), timed = dir_.file("timed.txt");
    ASSERT_EQ(run("predict -n " + model_ + " --input " + data_ + " -k 7 -s " + plain), 0) << out_;
    ASSERT_EQ(run("predict -n " + model_ + " --input " + data_ + " -k 7 -s " + timed +
                  " --timings --device cpu"),
              0)
        << out_;
    for (const char* phase :
         {"predict: load_data ", "predict: load_model ", "predict: load ", "predict: score ",
          "predict: top_k ", "predict: write ", "predict: sync ", "predict: total "}) {
        EXPECT_NE(out_.find(phase), std::string::npos) << phase << " in: " << out_;
    }
    EXPECT_EQ(out_.find("load_device"), std::string::npos) << "the CPU starts nothing: " << out_;
    EXPECT_EQ(testing::read_file(plain), testing::read_file(timed));

    const std::string bad_data = dir_.file("bad-data.nc"), bad_model = dir_.file("bad-model.nc");
    testing::write_file(bad_data, "this is not netCDF at all");
    const std::string model = testing::read_file(model_);
    testing::write_file(bad_model, model.substr(0, model.size() * 3 / 4));
    expect_failure("predict -n " + model_ + " --input " + bad_data + " -k 3", {"bad-data.nc"});
    expect_failure("predict -n " + bad_model + " --input " + data_ + " -k 3", {"bad-model.nc"});
    expect_failure("predict -n " + bad_model + " --input " + bad_data + " -k 3", {"bad-model.nc"});
    expect_failure("predict -n " + bad_data + " --input " + bad_data + " -k 3", {"bad-data.nc"});
    expect_failure("predict -n " + dir_.file("none.nc") + " --input " + data_ + " -k 3",
                   {"none.nc"});
}

TEST_F(Cli, HelpListsOptions) {
    for (const char* cmd : {"train", "predict", "evaluate", "generate"}) {
        ASSERT_EQ(run(std::string(cmd) + " --help"), 0) << cmd;
        EXPECT_NE(out_.find("usage: sparsenet " + std::string(cmd)), std::string::npos) << out_;
    }
}

}  // namespace
}  // namespace sparsenet
