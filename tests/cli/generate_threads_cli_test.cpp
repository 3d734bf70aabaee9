// `sparsenet generate` writes the same file, byte for byte, on any thread count: every random
// draw comes from a stream keyed by (seed, purpose, user or item), and the parallel set-up loops
// (above 2^17 users or items) and the per-user rows write what they write whatever thread runs
// them (src/data/generate.cpp).
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"

namespace sparsenet {
namespace {

TEST(GenerateThreadsCli, OneAndTwoThreadsWriteIdenticalFiles) {
    testing::TempDir dir;
    // 150,000 users and items: above the 2^17 where the set-up loops go parallel.
    const std::string args =
        " --users 150000 --items 150000 --nnz 600000 --holdout 0.1 --seed 7 -q";
    std::string files[2];
    for (int threads : {1, 2}) {
        const std::string out = dir.file("t" + std::to_string(threads) + ".nc");
        const std::string held = dir.file("h" + std::to_string(threads) + ".nc");
        std::string log;
        ASSERT_EQ(testing::run_command(std::string(SPARSENET_CLI_PATH) + " generate -o " + out +
                                           " --heldout-output " + held + " --threads " +
                                           std::to_string(threads) + args,
                                       &log),
                  0)
            << log;
        files[threads - 1] = testing::read_file(out) + testing::read_file(held);
    }
    ASSERT_GT(files[0].size(), 600000u);  // the indices alone are 4 B per interaction
    EXPECT_TRUE(files[0] == files[1]) << "the files written with 1 and 2 threads differ";
}

}  // namespace
}  // namespace sparsenet
