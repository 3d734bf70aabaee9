// IVF cells (engine/ann_ivf.h), the ANN index's kind ivf: every item in exactly one cell, the
// same cells from the same vectors, planted clusters found, a search over every cell equal to
// the exhaustive order, a one-cell search extended while it holds fewer items than it fetches,
// and inconsistent tables (a corrupt file) detected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "engine/ann_ivf.h"

namespace sparsenet::engine {
namespace {

// FP32 vectors of `dims` floats: the stored layout is the decoded one.
float l2(const void* a, const void* b, const void* param) {
    const size_t dims = *static_cast<const size_t*>(param);
    const auto* x = static_cast<const float*>(a);
    const auto* y = static_cast<const float*>(b);
    float s = 0.0f;
    for (size_t q = 0; q < dims; ++q) s += (x[q] - y[q]) * (x[q] - y[q]);
    return s;
}

struct Points {
    size_t n = 0, dims = 0;
    std::vector<float> x;  // [n, dims]
    IvfCells build(uint32_t cells) const {
        return IvfCells::build(
            reinterpret_cast<const char*>(x.data()), n, dims * sizeof(float), uint32_t(dims), cells,
            [this](size_t j, float* dst) { std::copy_n(x.data() + j * dims, dims, dst); });
    }
};

// `clusters` blobs of `per` points around centres far apart (unit Gaussian noise, centres 50
// apart per axis).
Points blobs(size_t clusters, size_t per, size_t dims, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    Points p;
    p.n = clusters * per;
    p.dims = dims;
    p.x.resize(p.n * dims);
    // Interleaved: point j belongs to blob j % clusters (the items of a cell are not contiguous).
    for (size_t j = 0; j < p.n; ++j)
        for (size_t q = 0; q < dims; ++q)
            p.x[j * dims + q] =
                (q == (j % clusters) % dims ? 50.0f * float(1 + (j % clusters) / dims) : 0.0f) +
                noise(rng);
    return p;
}

std::vector<int64_t> brute_force(const Points& p, const float* query, size_t fetch) {
    std::vector<std::pair<float, uint32_t>> all;
    for (size_t j = 0; j < p.n; ++j)
        all.emplace_back(l2(query, p.x.data() + j * p.dims, &p.dims), uint32_t(j));
    std::sort(all.begin(), all.end());
    std::vector<int64_t> ids;
    for (size_t i = 0; i < std::min(fetch, all.size()); ++i) ids.push_back(all[i].second);
    return ids;
}

TEST(IvfCells, DefaultCellsAreThePowerOfTwoAtOrAboveFourSquareRoots) {
    EXPECT_EQ(ivf_default_cells(0), 0u);
    EXPECT_EQ(ivf_default_cells(3), 3u);  // never more cells than items
    EXPECT_EQ(ivf_default_cells(27278), 1024u);
    EXPECT_EQ(ivf_default_cells(1000000), 4096u);
    EXPECT_EQ(ivf_default_cells(2000000), 8192u);
    EXPECT_EQ(ivf_default_cells(10000000), 16384u);
    EXPECT_EQ(ivf_default_cells(uint64_t(1) << 40), 65536u);
}

TEST(IvfCells, EveryItemIsInOneCellAndTheSameVectorsGiveTheSameCells) {
    const Points p = blobs(12, 150, 10, 4);
    const IvfCells a = p.build(16);
    EXPECT_EQ(a.cells, 16u);
    ASSERT_EQ(a.items(), p.n);
    std::vector<int> seen(p.n, 0);
    for (uint32_t j : a.item_of) ++seen[j];
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    for (uint32_t j = 0; j < p.n; ++j) {
        // The stored copy is the item's vector.
        EXPECT_TRUE(std::equal(p.x.begin() + std::ptrdiff_t(j * p.dims),
                               p.x.begin() + std::ptrdiff_t((j + 1) * p.dims),
                               reinterpret_cast<const float*>(a.stored(j))));
    }
    const IvfCells b = p.build(16);
    EXPECT_EQ(a.offsets, b.offsets);
    EXPECT_EQ(a.item_of, b.item_of);
    EXPECT_EQ(a.centroids, b.centroids);
    EXPECT_EQ(a.vectors, b.vectors);
    // More cells than items: one item a cell.
    Points few = p;
    few.n = 5;
    few.x.resize(5 * p.dims);
    const IvfCells c = few.build(64);
    EXPECT_EQ(c.cells, 5u);
    for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(c.offsets[i + 1] - c.offsets[i], 1u);
}

TEST(IvfCells, PlantedClustersBecomeCells) {
    const size_t clusters = 8, per = 200;
    const Points p = blobs(clusters, per, 8, 7);
    const IvfCells m = p.build(uint32_t(clusters));
    for (uint32_t c = 0; c < m.cells; ++c) {
        ASSERT_EQ(m.offsets[c + 1] - m.offsets[c], per) << "cell " << c;
        std::set<size_t> blob;
        for (uint64_t s = m.offsets[c]; s < m.offsets[c + 1]; ++s)
            blob.insert(m.item_of[s] % clusters);
        EXPECT_EQ(blob.size(), 1u) << "cell " << c << " mixes blobs";
    }
}

TEST(IvfCells, ScanningEveryCellGivesTheExhaustiveOrder) {
    const Points p = blobs(10, 100, 6, 9);
    const IvfCells m = p.build(20);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 30.0f);
    std::vector<int64_t> ids;
    std::vector<std::pair<float, uint32_t>> order, heap;
    for (int i = 0; i < 20; ++i) {
        std::vector<float> q(p.dims);
        for (float& v : q) v = normal(rng);
        for (size_t fetch : {1, 37, 1000, 5000}) {
            m.search(q.data(), q.data(), &l2, &p.dims, m.cells, fetch, ids, order, heap);
            EXPECT_EQ(ids, brute_force(p, q.data(), fetch)) << "query " << i << " fetch " << fetch;
        }
    }
}

TEST(IvfCells, AScanOfOneCellIsExtendedWhileItHoldsFewerItemsThanTheQueryFetches) {
    const size_t clusters = 8, per = 50;
    const Points p = blobs(clusters, per, 8, 3);
    const IvfCells m = p.build(uint32_t(clusters));
    std::vector<int64_t> ids;
    std::vector<std::pair<float, uint32_t>> order, heap;
    // A query at blob 3's centre: one cell is blob 3, whose items are the 50 nearest.
    const std::vector<float> q(p.x.begin() + 3 * 8, p.x.begin() + 4 * 8);
    m.search(q.data(), q.data(), &l2, &p.dims, 1, 20, ids, order, heap);
    ASSERT_EQ(ids.size(), 20u);
    for (int64_t j : ids) EXPECT_EQ(size_t(j) % clusters, 3u);
    EXPECT_EQ(ids, brute_force(p, q.data(), 20));
    // 120 wanted: blob 3's 50 and more cells until 120 items were seen (three cells).
    m.search(q.data(), q.data(), &l2, &p.dims, 1, 120, ids, order, heap);
    ASSERT_EQ(ids.size(), 120u);
    const std::vector<int64_t> nearest = brute_force(p, q.data(), 50);
    EXPECT_TRUE(std::equal(nearest.begin(), nearest.end(), ids.begin()));
    EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 120u);
}

// The search ranks the cells with an fp16 copy of the centroids, scaled by a power of two into
// fp16's range: centroids far beyond it (here 5e6) still rank right.
TEST(IvfCells, TheRankingCopyOfCentroidsBeyondFp16sRangeIsScaledIntoIt) {
    const size_t clusters = 8, per = 50;
    Points p = blobs(clusters, per, 8, 3);
    for (float& v : p.x) v *= 1e5f;
    const IvfCells m = p.build(uint32_t(clusters));
    EXPECT_LT(m.centroid_scale, 1.0f / 256.0f);
    ASSERT_EQ(m.centroids16.size(), m.centroids.size());
    for (size_t i = 0; i < m.centroids.size(); ++i) {
        EXPECT_NEAR(decode16(AnnVectors::kFp16, m.centroids16[i]) / m.centroid_scale,
                    m.centroids[i], 1e-3 * std::fabs(m.centroids[i]) + 1e-3f / m.centroid_scale);
    }
    std::vector<int64_t> ids;
    std::vector<std::pair<float, uint32_t>> order, heap;
    for (size_t blob = 0; blob < clusters; ++blob) {
        // A query at blob `blob`'s first point: one probed cell holds its 50 points.
        const std::vector<float> q(p.x.begin() + std::ptrdiff_t(blob * 8),
                                   p.x.begin() + std::ptrdiff_t((blob + 1) * 8));
        m.search(q.data(), q.data(), &l2, &p.dims, 1, per, ids, order, heap);
        ASSERT_EQ(ids.size(), per);
        for (int64_t j : ids) EXPECT_EQ(size_t(j) % clusters, blob);
    }
}

TEST(IvfCells, InconsistentTablesAreDetected) {
    const Points p = blobs(4, 30, 4, 2);
    const IvfCells good = p.build(4);
    IvfCells twice = good;
    twice.item_of[1] = twice.item_of[0];
    EXPECT_FALSE(twice.finish());
    IvfCells beyond = good;
    beyond.item_of[0] = uint32_t(p.n);
    EXPECT_FALSE(beyond.finish());
    IvfCells decreasing = good;
    std::swap(decreasing.offsets[1], decreasing.offsets[2]);
    decreasing.offsets[1] = decreasing.offsets[2] + 1;
    EXPECT_FALSE(decreasing.finish());
    IvfCells short_vectors = good;
    short_vectors.vectors.pop_back();
    EXPECT_FALSE(short_vectors.finish());
    IvfCells copy = good;
    EXPECT_TRUE(copy.finish());
}

}  // namespace
}  // namespace sparsenet::engine
