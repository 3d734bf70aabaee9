// sparsenet convert and sparsenet split, end to end: DSSTNE's MovieLens recipe unchanged, the
// written files (netCDF and index files) read back, and bad input failing loudly with no output.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "sparsenet/convert.h"
#include "sparsenet/dataset.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::TempDir;

class ConvertCli : public ::testing::Test {
  protected:
    int run(const std::string& args) {
        return testing::run_command("cd " + dir_.path() + " && " + SPARSENET_CLI_PATH + " " + args,
                                    &out_);
    }

    // Exit code 1 for bad data, 2 for a bad command line (usage).
    void expect_failure(const std::string& args, const std::vector<std::string>& mentions,
                        int code = 1) {
        EXPECT_EQ(run(args), code) << args << "\n" << out_;
        for (const std::string& m : mentions) {
            EXPECT_NE(out_.find(m), std::string::npos) << "missing '" << m << "' in: " << out_;
        }
    }

    bool exists(const std::string& name) { return std::filesystem::exists(dir_.file(name)); }

    TempDir dir_;
    std::string out_;
};

// DSSTNE's MovieLens sample: the same text twice, into gl_input and gl_output, with separate
// feature indexes and one samples index.
TEST_F(ConvertCli, DsstneMovieLensRecipeAligns) {
    testing::write_file(dir_.file("ml"), "u1\t10,100:20,200\nu2\t30,300\nu3\t10,400:30,500\n");
    ASSERT_EQ(run("convert -d gl_input -i ml -o gl_input.nc -f features_input -s samples_input "
                  "-c"),
              0)
        << out_;
    EXPECT_NE(out_.find("wrote gl_input.nc: gl_input 3 rows x 3 columns, 5 nonzeros"),
              std::string::npos)
        << out_;
    ASSERT_EQ(run("convert -d gl_output -i ml -o gl_output.nc -f features_output -s samples_input "
                  "-c"),
              0)
        << out_;
    const Dataset in = Dataset::read(dir_.file("gl_input.nc"), "gl_input");
    const Dataset out = Dataset::read(dir_.file("gl_output.nc"), "gl_output");
    EXPECT_EQ(in.offsets, out.offsets);
    EXPECT_EQ(in.indices, out.indices);
    const LabelIndex samples = LabelIndex::read(dir_.file("samples_input"));
    EXPECT_EQ(samples.size(), 3u);
    EXPECT_EQ(LabelIndex::read(dir_.file("features_output")).size(), 3u);

    // A later, smaller file converted with the same samples index keeps every row in place.
    testing::write_file(dir_.file("later"), "u3\t20\nu4\t10\n");
    ASSERT_EQ(run("convert -d gl_input -i later -o later.nc -f features_input -s samples_input"), 0)
        << out_;
    const Dataset later = Dataset::read(dir_.file("later.nc"));
    EXPECT_EQ(later.rows, 4u);
    EXPECT_EQ(later.row_length(0), 0u);
    EXPECT_EQ(later.row_length(2), 1u);
    EXPECT_EQ(LabelIndex::read(dir_.file("samples_input")).label(3), "u4");
}

TEST_F(ConvertCli, OneFileHoldsInputAndOutputAndAnalogValues) {
    testing::write_file(dir_.file("r.csv"),
                        "userId,movieId,rating,timestamp\n1,5,4.5,0\n2,5,1,0\n");
    ASSERT_EQ(run("convert -i r.csv -o r.nc -d gl_input,gl_output -f f -s s -c -t analog"), 0)
        << out_;
    const std::vector<std::string> names = list_datasets(dir_.file("r.nc"));
    EXPECT_EQ(names, (std::vector<std::string>{"gl_input", "gl_output"}));
    const Dataset d = Dataset::read(dir_.file("r.nc"), "gl_output");
    EXPECT_EQ(d.values, (std::vector<float>{4.5f, 1.0f}));
    ASSERT_EQ(run("convert -i r.csv -o r4.nc -d x -f f4 -s s4 -c --min-rating 4"), 0) << out_;
    EXPECT_NE(out_.find("1 below it were skipped"), std::string::npos) << out_;
    EXPECT_EQ(Dataset::read(dir_.file("r4.nc")).nnz(), 1u);
}

TEST_F(ConvertCli, BadInputFailsWithNoOutput) {
    testing::write_file(dir_.file("bad"), "u1\t10\nu2 20\n");
    expect_failure("convert -i bad -o bad.nc -d x -f f -s s -c", {"bad:2:", "missing tab"});
    EXPECT_FALSE(exists("bad.nc"));
    EXPECT_FALSE(exists("f"));
    EXPECT_FALSE(exists("s"));

    testing::write_file(dir_.file("good"), "u1\t10\n");
    expect_failure("convert -i good -o g.nc -d x -f nonexistent -s s",
                   {"nonexistent", "does not exist", "-c"});
    ASSERT_EQ(run("convert -i good -o g.nc -d x -f f -s s -c"), 0) << out_;
    testing::write_file(dir_.file("more"), "u2\t10:11\n");
    expect_failure("convert -i more -o m.nc -d x -f f -s s",
                   {"more:1:", "feature '11' is not in the features index"});
    EXPECT_FALSE(exists("m.nc"));
    ASSERT_EQ(run("convert -i more -o m.nc -d x -f f -s s --drop-unknown"), 0) << out_;
    EXPECT_NE(out_.find("dropped 1 interaction with 1 distinct feature not in f"),
              std::string::npos)
        << out_;
    ASSERT_EQ(run("convert -i more -o m2.nc -d x -f f -s s -m"), 0) << out_;
    EXPECT_EQ(LabelIndex::read(dir_.file("f")).size(), 2u);

    EXPECT_EQ(run("convert -i good -o g.nc -d x -f f -s s -c -m"), 2) << out_;
    EXPECT_EQ(run("convert -i good -o g.nc -d x -f f -s s -t binary"), 2) << out_;
    expect_failure("convert -i missing.txt -o g.nc -d x -f f -s s -c", {"missing.txt"});
    testing::write_file(dir_.file("badindex"), "a\t0\nb\t0\n");
    expect_failure("convert -i good -o g.nc -d x -f badindex -s s",
                   {"badindex:2:", "index 0 is given to two labels"});
}

TEST_F(ConvertCli, SplitFixedStrongAndRandom) {
    testing::write_file(dir_.file("train.txt"), "0 0 1 2\n1 1 3\n2 0 2 3 4\n");
    testing::write_file(dir_.file("test.txt"), "0 3\n1 0\n2 1\n");
    ASSERT_EQ(run("split fixed --train train.txt --test test.txt -o fixed"), 0) << out_;
    const Dataset train = Dataset::read(dir_.file("fixed/train.nc"), "gl_input");
    const Dataset test = Dataset::read(dir_.file("fixed/test.nc"));
    EXPECT_EQ(train.cols, 5u);
    EXPECT_EQ(test.cols, 5u);
    EXPECT_EQ(test.indices, (std::vector<uint32_t>{3, 0, 1}));
    EXPECT_EQ(LabelIndex::read(dir_.file("fixed/items.index")).size(), 5u);

    testing::write_file(dir_.file("test_new_item.txt"), "0 9\n");
    expect_failure("split fixed --train train.txt --test test_new_item.txt -o f2",
                   {"test_new_item.txt:1:", "feature 9 is not in the features index"});
    ASSERT_EQ(run("split fixed --train train.txt --test test_new_item.txt --drop-unknown "
                  "--carve-validation 0.5 -o f3"),
              0)
        << out_;
    const Dataset fit = Dataset::read(dir_.file("f3/train_fit.nc"));
    const Dataset carved = Dataset::read(dir_.file("f3/validation.nc"));
    EXPECT_EQ(fit.nnz() + carved.nnz(), train.nnz());

    // --carve-from last: each user's last listed items (numeric ids: column = label) go to
    // validation; --recency TAU weighs the input dataset of both training files by the items
    // listed after each one, the target stays 0/1.
    testing::write_file(dir_.file("order.txt"), "0 4 2 0 3 1 5 6 7 8 9\n1 9 8 7\n2 5\n");
    testing::write_file(dir_.file("order_test.txt"), "1 0\n2 9\n");
    ASSERT_EQ(run("split fixed --train order.txt --test order_test.txt --carve-validation 0.2 "
                  "--carve-from last --recency 2 -o f4"),
              0)
        << out_;
    const Dataset held = Dataset::read(dir_.file("f4/validation.nc"));
    EXPECT_EQ(held.offsets, (std::vector<uint64_t>{0, 2, 3, 3}));  // round(0.2 x 10, 3, 1)
    EXPECT_EQ(held.indices, (std::vector<uint32_t>{8, 9, 7}));
    const Dataset fit_in = Dataset::read(dir_.file("f4/train_fit.nc"), "gl_input");
    const Dataset fit_out = Dataset::read(dir_.file("f4/train_fit.nc"), "gl_output");
    EXPECT_TRUE(fit_out.is_boolean());
    EXPECT_EQ(fit_in.indices, fit_out.indices);
    EXPECT_EQ(fit_in.offsets, (std::vector<uint64_t>{0, 8, 10, 11}));
    // user 0 kept 4 2 0 3 1 5 6 7: item 7 is the last (age 0), item 4 the first (age 7)
    ASSERT_EQ(fit_in.indices[7], 7u);
    EXPECT_FLOAT_EQ(fit_in.values[7], 1.0f);
    EXPECT_FLOAT_EQ(fit_in.values[4], float(std::exp(-7.0 / 2)));  // item 4
    EXPECT_FLOAT_EQ(fit_in.values[0], float(std::exp(-5.0 / 2)));  // item 0, third listed
    const Dataset all_in = Dataset::read(dir_.file("f4/train.nc"), "gl_input");
    EXPECT_FLOAT_EQ(all_in.values[9], 1.0f);                       // item 9, last of user 0
    EXPECT_FLOAT_EQ(all_in.values[0], float(std::exp(-7.0 / 2)));  // item 0, third of ten
    EXPECT_TRUE(Dataset::read(dir_.file("f4/train.nc"), "gl_output").is_boolean());
    expect_failure(
        "split fixed --train order.txt --test order_test.txt --carve-validation 0.2 "
        "--recency 2 -o f5",
        {"--recency", "--carve-from last"}, 2);
    expect_failure(
        "split fixed --train order.txt --test order_test.txt --carve-validation 0.2 "
        "--carve-from first -o f5",
        {"--carve-from", "random or last", "first"}, 2);
    expect_failure(
        "split fixed --train order.txt --test order_test.txt --carve-validation 0.2 "
        "--carve-from last --seed 3 -o f5",
        {"--seed"}, 2);
    expect_failure("split fixed --train order.txt --test order_test.txt --recency 0 -o f5",
                   {"--recency", "TAU > 0"}, 2);
    EXPECT_FALSE(exists("f5"));

    std::string csv = "userId,movieId,rating,timestamp\n";
    for (int u = 0; u < 40; ++u) {
        for (int i = 0; i < 10; ++i) {
            csv += std::to_string(u) + "," + std::to_string((u * 7 + i * 3) % 50) + ",4,0\n";
        }
    }
    testing::write_file(dir_.file("r.csv"), csv);
    ASSERT_EQ(run("split strong -i r.csv --min-rating 4 --heldout-users 5 -o strong"), 0) << out_;
    for (const char* f : {"train.nc", "validation_fold_in.nc", "validation_heldout.nc",
                          "test_fold_in.nc", "test_heldout.nc", "items.index", "train_users.index",
                          "validation_users.index", "test_users.index"}) {
        EXPECT_TRUE(exists(std::string("strong/") + f)) << f;
    }
    const Dataset te = Dataset::read(dir_.file("strong/test_heldout.nc"));
    EXPECT_EQ(te.rows, 5u);
    EXPECT_EQ(te.nnz(), 10u);  // floor(0.2 * 10) per user
    expect_failure("split strong -i r.csv --heldout-users 20 -o s2", {"40 users", "need more"});

    ASSERT_EQ(run("split random -i r.csv --seed 3 -o random"), 0) << out_;
    EXPECT_EQ(Dataset::read(dir_.file("random/test.nc")).nnz(), 80u);
    EXPECT_EQ(Dataset::read(dir_.file("random/train.nc")).nnz(), 320u);
    EXPECT_EQ(run("split nonsense"), 2);
}

}  // namespace
}  // namespace sparsenet
