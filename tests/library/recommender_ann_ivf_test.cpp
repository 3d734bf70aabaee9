// ANN index of kind ivf (k-means cells, engine/ann_ivf.h) behind a Recommender: scanning every
// cell answers exactly what the model answers (FP32 vectors) or what a flat index of the same
// 16-bit vectors answers; the same model gives the same file; its memory is the vectors and the
// tables; flat and cells agree for vectors of any size; a file whose cells are inconsistent,
// truncated, or of kind ivf in a version 2 file is refused naming it. (Filters with approximate
// cells: recommender_ann_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "library/ann_test_util.h"
#include "library/library_test_util.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/error.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::recommender_config;
using testing::ann::save_network;
using testing::ann::with_ann;

// Kinds ivf and flat only: run in every build (the GPU kit's, without hnswlib, too).
using AnnIvfTest = testing::ann::CellsFixture;

TEST_F(AnnIvfTest, ScanningEveryCellAnswersTheExactAnswer) {
    for (const std::string activation : {"Sigmoid", "Linear"}) {
        SCOPED_TRACE(activation);
        const uint32_t items = 900;
        const std::string model =
            save_network(recommender_config(activation, 24), items, dir.file(activation + ".nc"));
        AnnIndexOptions build;
        build.kind = "ivf";
        build.vectors = "fp32";
        build.cells = 16;
        const AnnIndexReport report = build_ann_index(model, dir.file(activation + ".ann"), build);
        EXPECT_EQ(report.kind, "ivf");
        EXPECT_EQ(report.cells, 16u);
        EXPECT_EQ(report.probe, 8u);  // 1/32 of the cells, at least 8
        const Recommender exact(model);
        const Recommender ann(model, with_ann(dir.file(activation + ".ann"), 16));
        testing::ann::expect_same_answers(ann, exact, items, 150, 30, 17);
        EXPECT_EQ(ann.ann_queries(), 300u);
    }
}

TEST_F(AnnIvfTest, SixteenBitCellsAnswerAsAFlatIndexOfTheSameVectorsAndHoldThemOnce) {
    const uint32_t items = 1200, width = 32, cells = 24;
    const std::string model =
        save_network(recommender_config("Sigmoid", width), items, dir.file("m.nc"));
    AnnIndexOptions flat;
    flat.kind = "flat";
    build_ann_index(model, dir.file("flat.ann"), flat);  // fp16, the default
    AnnIndexOptions ivf;
    ivf.cells = cells;
    const AnnIndexReport report = build_ann_index(model, dir.file("ivf.ann"), ivf);
    EXPECT_EQ(report.vectors, "fp16");
    const Recommender by_cells(model, with_ann(dir.file("ivf.ann"), cells));
    const Recommender by_flat(model, with_ann(dir.file("flat.ann")));
    testing::ann::expect_same_answers(by_cells, by_flat, items, 100, 25, 5);
    // The vectors (32 fp16 weights, the bias and the augmentation in FP32), the item of each
    // slot and its inverse, the offsets, the centroids (FP32, width + 2; and fp16, the search's
    // ranking copy) and their norms.
    const size_t vector_bytes = width * 2 + 8;
    EXPECT_EQ(by_cells.ann_memory_bytes(), items * (vector_bytes + 8) + (cells + 1) * 8 +
                                               cells * (width + 2 + 1) * 4 +
                                               cells * (width + 2) * 2);
    EXPECT_EQ(report.index_bytes, by_cells.ann_memory_bytes());
    // The same model, the same file, whatever the threads.
    AnnIndexOptions one = ivf;
    one.threads = 1;
    build_ann_index(model, dir.file("ivf1.ann"), one);
    EXPECT_EQ(testing::read_file(dir.file("ivf.ann")), testing::read_file(dir.file("ivf1.ann")));
}

// Widths whose 16-bit vectors take 4 bytes modulo 8 (6: 12 + 8 bytes): the flat kind scans one
// cell since hnswlib's BruteforceSearch read its labels unaligned there (undefined behaviour,
// found by fuzz_ann; the ASan + UBSan preset runs this).
TEST_F(AnnIvfTest, FlatAndCellsOfOddSizedVectorsAnswerAlike) {
    for (const uint32_t width : {6u, 7u}) {
        SCOPED_TRACE(width);
        const uint32_t items = 150;
        const std::string model = save_network(recommender_config("Sigmoid", width), items,
                                               dir.file(std::to_string(width) + ".nc"));
        AnnIndexOptions flat;
        flat.kind = "flat";
        build_ann_index(model, dir.file("flat.ann"), flat);
        AnnIndexOptions ivf;
        ivf.cells = 8;
        build_ann_index(model, dir.file("ivf.ann"), ivf);
        const Recommender by_flat(model, with_ann(dir.file("flat.ann")));
        const Recommender by_cells(model, with_ann(dir.file("ivf.ann"), 8));
        testing::ann::expect_same_answers(by_cells, by_flat, items, 40, 12, 3);
    }
}

TEST_F(AnnIvfTest, InconsistentTruncatedOrMislabelledFilesAreRefusedNamingThem) {
    const uint32_t items = 300, width = 8;
    const std::string model =
        save_network(recommender_config("Sigmoid", width), items, dir.file("m.nc"));
    AnnIndexOptions build;
    build.cells = 10;
    build_ann_index(model, dir.file("good.ann"), build);
    const std::string bytes = testing::read_file(dir.file("good.ann"));
    uint32_t version;
    std::memcpy(&version, bytes.data() + 16, 4);
    EXPECT_EQ(version, 3u);
    // The file ends with the item of each slot [items] and the vectors [items, 2 width + 8].
    const size_t item_of = bytes.size() - items * (2 * width + 8) - items * 4;
    std::string twice = bytes;
    std::memcpy(twice.data() + item_of, bytes.data() + item_of + 4, 4);  // slot 0 = slot 1
    testing::write_file(dir.file("twice.ann"), twice);
    testing::write_file(dir.file("short.ann"), bytes.substr(0, bytes.size() - 3));
    std::string v2 = bytes;
    const uint32_t two = 2;
    std::memcpy(v2.data() + 16, &two, 4);
    testing::write_file(dir.file("v2.ann"), v2);
    auto refused = [&](const std::string& file, const std::string& fragment) {
        try {
            Recommender r(model, with_ann(file));
            ADD_FAILURE() << "expected " << file << " to be refused";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kIo) << e.what();
            const std::string m = e.what();
            EXPECT_NE(m.find(file), std::string::npos) << m;
            EXPECT_NE(m.find(fragment), std::string::npos) << m;
        }
    };
    refused(dir.file("twice.ann"), "its cells do not hold each item once");
    refused(dir.file("short.ann"), "truncated ANN index");
    refused(dir.file("v2.ann"), "corrupt ANN index (kind 'ivf'");
    EXPECT_NO_THROW(Recommender(model, with_ann(dir.file("good.ann"))));
}

// ivf and flat need nothing of hnswlib; kind hnsw builds where the build has it and is refused,
// naming it, where not.
TEST_F(AnnIvfTest, KindHnswNeedsHnswlibAndNothingElseDoes) {
    const uint32_t items = 200;
    const std::string model =
        save_network(recommender_config("Sigmoid", 8), items, dir.file("m.nc"));
    AnnIndexOptions ivf;
    ivf.cells = 4;
    EXPECT_EQ(build_ann_index(model, dir.file("ivf.ann"), ivf).kind, "ivf");
    const Recommender served(model, with_ann(dir.file("ivf.ann"), 4));
    EXPECT_EQ(served.recommend({1, 2, 3}).items.size(), 10u);
    AnnIndexOptions hnsw;
    hnsw.kind = "hnsw";
    if (ann_index_available("hnsw")) {
        EXPECT_EQ(build_ann_index(model, dir.file("hnsw.ann"), hnsw).kind, "hnsw");
        return;
    }
    try {
        build_ann_index(model, dir.file("hnsw.ann"), hnsw);
        ADD_FAILURE() << "expected kind hnsw to be refused without hnswlib";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage) << e.what();
        const std::string m = e.what();
        EXPECT_NE(m.find("needs hnswlib"), std::string::npos) << m;
        EXPECT_NE(m.find(dir.file("hnsw.ann")), std::string::npos) << m;
    }
}

}  // namespace
}  // namespace sparsenet
