// The real datasets of ../shared/data convert with the counts their READMEs state.
#include <gtest/gtest.h>

#include <filesystem>

#include "sparsenet/convert.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

const std::string kData = SPARSENET_SHARED_DATA_DIR;

std::string shared(const std::string& file) {
    const std::string path = kData + "/" + file;
    if (!std::filesystem::exists(path)) return "";
    return path;
}

#define REQUIRE_SHARED(var, file)         \
    const std::string var = shared(file); \
    if (var.empty()) GTEST_SKIP() << kData << "/" << file << " is not available"

TEST(RealData, GowallaLightGcnSplit) {
    REQUIRE_SHARED(train_path, "gowalla/train.txt");
    REQUIRE_SHARED(test_path, "gowalla/test.txt");
    LabelIndex users, items;
    const Dataset train = convert_text({train_path}, "train", {}, users, items);
    ConvertOptions frozen;
    frozen.grow_features = false;
    const Dataset test = convert_text({test_path}, "test", frozen, users, items);
    EXPECT_EQ(train.rows, 29858u);
    EXPECT_EQ(train.cols, 40981u);
    EXPECT_EQ(train.nnz(), 810128u);
    EXPECT_EQ(test.rows, 29858u);
    EXPECT_EQ(test.cols, 40981u);
    EXPECT_EQ(test.nnz(), 217242u);
    // README: every user has at least 1 test item and 8 train items; no pair in both files.
    uint64_t overlap = 0;
    for (uint64_t r = 0; r < train.rows; ++r) {
        EXPECT_GE(train.row_length(r), 8u);
        EXPECT_GE(test.row_length(r), 1u);
        std::vector<uint32_t> common;
        std::set_intersection(
            train.indices.begin() + train.offsets[r], train.indices.begin() + train.offsets[r + 1],
            test.indices.begin() + test.offsets[r], test.indices.begin() + test.offsets[r + 1],
            std::back_inserter(common));
        overlap += common.size();
    }
    EXPECT_EQ(overlap, 0u);
}

TEST(RealData, MovieLens100K) {
    REQUIRE_SHARED(path, "movielens/ml-100k/u.data");
    LabelIndex users, items;
    ConvertOptions analog;
    analog.analog = true;
    const Dataset d = convert_text({path}, "ratings", analog, users, items);
    EXPECT_EQ(d.rows, 943u);
    EXPECT_EQ(d.cols, 1682u);
    EXPECT_EQ(d.nnz(), 100000u);
    // README: rating counts 1:6,110 / 2:11,370 / 3:27,145 / 4:34,174 / 5:21,201.
    std::vector<uint64_t> counts(6, 0);
    for (float v : d.values) ++counts[static_cast<size_t>(v)];
    EXPECT_EQ(counts, (std::vector<uint64_t>{0, 6110, 11370, 27145, 34174, 21201}));
    for (uint64_t r = 0; r < d.rows; ++r) EXPECT_GE(d.row_length(r), 20u);
}

TEST(RealData, MovieLensLatestSmall) {
    REQUIRE_SHARED(path, "movielens/ml-latest-small/ratings.csv");
    LabelIndex users, items;
    ConvertStats stats;
    const Dataset d = convert_text({path}, "ratings", {}, users, items, &stats);
    EXPECT_TRUE(stats.header_skipped);
    EXPECT_EQ(d.rows, 610u);
    EXPECT_EQ(d.cols, 9724u);
    EXPECT_EQ(d.nnz(), 100836u);
}

TEST(RealData, MovieLens1MLcfnSplit) {
    REQUIRE_SHARED(train_path, "movielens1m_m1/train.txt");
    REQUIRE_SHARED(valid_path, "movielens1m_m1/valid.txt");
    REQUIRE_SHARED(test_path, "movielens1m_m1/test.txt");
    LabelIndex users, items;
    const Dataset train = convert_text({train_path}, "train", {}, users, items);
    ConvertOptions frozen;
    frozen.grow_features = false;
    const Dataset valid = convert_text({valid_path}, "valid", frozen, users, items);
    const Dataset test = convert_text({test_path}, "test", frozen, users, items);
    EXPECT_EQ(train.rows, 6022u);
    EXPECT_EQ(train.cols, 3043u);
    EXPECT_EQ(train.nnz(), 796244u);
    EXPECT_EQ(valid.nnz(), 99455u);
    EXPECT_EQ(test.nnz(), 99455u);
}

}  // namespace
}  // namespace sparsenet
