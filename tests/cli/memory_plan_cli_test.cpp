// `sparsenet train`'s memory plan (docs/memory.md): --dry-run prints the memory of one device
// and of each of N ranks for a 10,000,000-item network from the datasets' headers (the file is
// tiny in nonzeros), and a run whose plan exceeds the free memory (faked with
// SPARSENET_MEMORY_LIMIT_BYTES) is refused before anything is loaded or written, naming what is
// needed, what is free and what would fit, with exit code 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "sparsenet/dataset.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::contains;
using testing::TempDir;

std::string wide_config(uint32_t hidden) {
    return R"({ "Name": "wide", "Kind": "AutoEncoder", "ErrorFunction": "CrossEntropy",
      "Layers": [
        { "Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true },
        { "Name": "Hidden", "Kind": "Hidden", "N": )" +
           std::to_string(hidden) + R"(, "Activation": "Tanh" },
        { "Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
          "Activation": "Sigmoid", "Sparse": true } ] })";
}

class MemoryPlanCli : public ::testing::Test {
  protected:
    // Four users of `items` items, three nonzeros in all, under both dataset names.
    void write_data(uint32_t items) {
        Dataset d;
        d.name = "gl_input";
        d.rows = 4;
        d.cols = items;
        d.offsets = {0, 1, 2, 2, 3};
        d.indices = {0, items / 2, items - 1};
        Dataset out = d;
        out.name = "gl_output";
        write_datasets(data_, {d, out});
    }
    int train(const std::string& env, const std::string& flags, std::string* out) {
        return testing::run_command(env + " " + std::string(SPARSENET_CLI_PATH) + " train -c " +
                                        config_ + " -i " + data_ + " -n " + model_ +
                                        " --device cpu -e 1 " + flags,
                                    out);
    }
    size_t files_in_dir() const {
        size_t n = 0;
        for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_.path())) ++n;
        return n;
    }
    TempDir dir_;
    std::string data_ = dir_.file("data.nc"), config_ = dir_.file("net.json"),
                model_ = dir_.file("model.nc");
};

// 10,000,000 -> 256 -> 10,000,000: each matrix 10^7 x 256 x 4 B = 10.24 GB, so 20.48 GB of
// weights on one device and 5.12 GB per rank of 4; the output's activations at batch 256 are
// 256 x 10^7 x 4 B = 10.24 GB, its delta written over them (the four examples cap a batch at 4
// rows: 160 MB).
TEST_F(MemoryPlanCli, DryRunOfTenMillionItemsPrintsPerDeviceMemory) {
    write_data(10000000);
    testing::write_file(config_, wide_config(256));
    std::string out;
    ASSERT_EQ(train("", "-b 256 --optimizer momentum --dry-run --ranks 4", &out), 0) << out;
    EXPECT_TRUE(contains(out, "memory plan for one device, batch 256:")) << out;
    EXPECT_TRUE(contains(out, "  weights: 20.48 GB\n")) << out;
    EXPECT_TRUE(contains(out, "  optimizer state: 20.52 GB\n")) << out;  // + the biases' state
    // Momentum's step on Hidden -> Output runs inside its gradient GEMM: no dense gradient on
    // one device, nor on a rank of 4 (split by output columns, its GEMM reads the gathered
    // activations); --parallel data sums whole gradients.
    const size_t one = out.find("memory plan for one device"), split = out.find("per rank of 4");
    const size_t data_parallel = out.find("--parallel data, each of the 4 ranks:");
    ASSERT_LT(one, split) << out;
    ASSERT_LT(split, data_parallel) << out;
    EXPECT_FALSE(contains(out.substr(one, split - one), "dense weight gradients")) << out;
    EXPECT_FALSE(contains(out.substr(split, data_parallel - split), "dense weight gradients"))
        << out;
    EXPECT_TRUE(contains(out.substr(data_parallel), "  dense weight gradients: 10.24 GB\n")) << out;
    EXPECT_TRUE(contains(out.substr(one, split - one), "  activations and deltas: 160.0 MB\n"))
        << out;
    EXPECT_TRUE(
        contains(out.substr(split, data_parallel - split), "  activations and deltas: 40.0 MB\n"))
        << out;
    EXPECT_TRUE(contains(out, "memory plan per rank of 4, batch 256:")) << out;
    EXPECT_TRUE(contains(out, "  weights: 5.12 GB\n")) << out;
    EXPECT_TRUE(contains(out, "of host memory (the CPU device)")) << out;
    EXPECT_FALSE(std::filesystem::exists(model_));
}

// --precision bf16 (the flag or $.Training.Precision): the BF16 copy of the Hidden -> Output
// matrix beside its FP32 master (2 B a weight; the sparse input's matrix has none: csr_matmul
// reads FP32); fp32 and tf32 plan none.
TEST_F(MemoryPlanCli, Bf16PlansTheWeightCopies) {
    write_data(10000000);
    testing::write_file(config_, wide_config(256));
    std::string out;
    ASSERT_EQ(train("", "-b 256 --optimizer sgd --dry-run --precision bf16", &out), 0) << out;
    EXPECT_TRUE(contains(out, "memory plan for one device, batch 256, precision bf16")) << out;
    EXPECT_TRUE(contains(out, "  weights: 20.48 GB\n")) << out;
    EXPECT_TRUE(contains(out, "  BF16 weight copies (--precision bf16): 5.12 GB\n")) << out;
    for (const char* p : {"fp32", "tf32"}) {
        ASSERT_EQ(train("", std::string("-b 256 --dry-run --precision ") + p, &out), 0) << out;
        EXPECT_FALSE(contains(out, "BF16")) << out;
    }
}

// The dense gradient is planned where training writes one: Adam's step is not linear in it,
// SPARSENET_FUSED_UPDATE=0 turns the fused steps off, --parallel data sums whole gradients.
TEST_F(MemoryPlanCli, DenseGradientsArePlannedWhereTheStepIsNotFused) {
    write_data(10000000);
    testing::write_file(config_, wide_config(256));
    std::string out;
    ASSERT_EQ(train("", "-b 256 --optimizer adam --dry-run", &out), 0) << out;
    EXPECT_TRUE(contains(out, "  dense weight gradients: 10.24 GB\n")) << out;
    ASSERT_EQ(train("SPARSENET_FUSED_UPDATE=0", "-b 256 --optimizer momentum --dry-run", &out), 0)
        << out;
    EXPECT_TRUE(contains(out, "  dense weight gradients: 10.24 GB\n")) << out;
    ASSERT_EQ(train("", "-b 256 --optimizer sgd --dry-run --ranks 2", &out), 0) << out;
    EXPECT_TRUE(contains(out, "--parallel data, each of the 2 ranks:\n")) << out;
    const size_t one = out.find("memory plan for one device"), split = out.find("per rank of 2");
    const size_t data_parallel = out.find("--parallel data, each of the 2 ranks:");
    ASSERT_LT(one, split) << out;
    ASSERT_LT(split, data_parallel) << out;
    EXPECT_FALSE(contains(out.substr(one, split - one), "dense weight gradients")) << out;
    EXPECT_FALSE(contains(out.substr(split, data_parallel - split), "dense weight gradients"))
        << out;
    EXPECT_TRUE(contains(out.substr(data_parallel), "  dense weight gradients: 10.24 GB\n")) << out;
    // Adam's step is not linear in the gradient: a split matrix keeps its dense one too.
    ASSERT_EQ(train("", "-b 256 --optimizer adam --dry-run --ranks 2", &out), 0) << out;
    EXPECT_TRUE(contains(out, "memory plan per rank of 2, batch 256:\n  weights: 10.24 GB\n"))
        << out;
    EXPECT_TRUE(contains(out, "  dense weight gradients: 5.12 GB\n")) << out;
    EXPECT_FALSE(std::filesystem::exists(model_));
}

// With 30 GB free the 10,000,000-item plan (41 GB of weights and state alone, 52 GB in all) does
// not fit; model parallelism over 2 ranks does (26 GB each). Nothing is written.
TEST_F(MemoryPlanCli, APlanThatCannotFitIsRefusedBeforeAnythingIsWritten) {
    write_data(10000000);
    testing::write_file(config_, wide_config(256));
    const size_t before = files_in_dir();
    std::string out;
    const int rc =
        train("SPARSENET_MEMORY_LIMIT_BYTES=30000000000", "-b 256 --optimizer momentum", &out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_TRUE(contains(out, "the training run needs ")) << out;
    EXPECT_TRUE(contains(out, "(weights 20.48 GB, optimizer state")) << out;
    EXPECT_TRUE(contains(out, "but 30.00 GB is free (SPARSENET_MEMORY_LIMIT_BYTES)")) << out;
    EXPECT_TRUE(contains(out, "what would fit: model parallelism over 2 ranks (mpirun -np 2"))
        << out;
    EXPECT_FALSE(std::filesystem::exists(model_));
    EXPECT_EQ(files_in_dir(), before);  // no temporary, no checkpoint
}

// A 1,000,000-item output at batch 1024 (capped by the 256 examples at 256 rows) needs
// 256 x 10^6 x 4 B = 1.02 GB of activations (its delta written over them); with 1 GB free,
// batch 128 (512 MB of them, about 0.8 GB in all) is the largest power of two that fits.
TEST_F(MemoryPlanCli, TheRefusalNamesASmallerBatchThatFits) {
    Dataset d;
    d.name = "gl_input";
    d.rows = 256;
    d.cols = 1000000;
    d.offsets.assign(257, 0);
    for (uint64_t r = 0; r < 256; ++r) {
        d.indices.push_back(uint32_t(r * 97));
        d.offsets[r + 1] = r + 1;
    }
    Dataset out_data = d;
    out_data.name = "gl_output";
    write_datasets(data_, {d, out_data});
    testing::write_file(config_, wide_config(8));
    std::string out;
    EXPECT_EQ(train("SPARSENET_MEMORY_LIMIT_BYTES=1000000000", "-b 1024", &out), 1) << out;
    EXPECT_TRUE(contains(out, "--batch 128 (")) << out;
    EXPECT_FALSE(std::filesystem::exists(model_));
    // The same run with the memory it needs starts (and trains).
    EXPECT_EQ(train("SPARSENET_MEMORY_LIMIT_BYTES=1000000000", "-b 128 -q", &out), 0) << out;
    EXPECT_TRUE(std::filesystem::exists(model_));
}

TEST_F(MemoryPlanCli, AMalformedLimitIsAUsageError) {
    write_data(100);
    testing::write_file(config_, wide_config(4));
    std::string out;
    EXPECT_EQ(train("SPARSENET_MEMORY_LIMIT_BYTES=lots", "-b 4", &out), 2) << out;
    EXPECT_TRUE(contains(out, "SPARSENET_MEMORY_LIMIT_BYTES='lots': expected a number of bytes"))
        << out;
}

}  // namespace
}  // namespace sparsenet
