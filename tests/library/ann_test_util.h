// Helpers of the ANN index tests (recommender_ann_test.cpp, recommender_ann16_test.cpp): small
// autoencoders saved to files, random queries with filters, exact comparison of answers.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "library/library_test_util.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet::testing::ann {

// The ANN tests' fixture: a temporary folder; skipped in a build without hnswlib (the tests build
// hnsw indexes too).
class Fixture : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!ann_index_available("hnsw")) {
            GTEST_SKIP() << "built without hnswlib (SPARSENET_HNSWLIB)";
        }
    }
    TempDir dir;
};

// For tests of kinds ivf and flat alone, which every build has: never skipped.
class CellsFixture : public ::testing::Test {
  protected:
    TempDir dir;
};

inline std::string save_network(const NetworkConfig& c, uint32_t items, const std::string& path,
                                uint64_t seed = 3) {
    NetworkOptions options;
    options.device = "cpu";
    options.seed = seed;
    Network net = Network::create(c, {{"in", items}, {"out", items}}, options);
    // Biases that differ per item (popularity), so that [w, b] vectors differ in norm.
    std::vector<float> b = net.get_parameter("bias:Output");
    std::mt19937 rng{uint32_t(seed)};
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (float& v : b) v += normal(rng);
    net.set_parameter("bias:Output", b);
    net.save(path);
    return path;
}

inline RecommenderOptions with_ann(const std::string& path, uint32_t probe = 0) {
    RecommenderOptions o;
    o.ann_index = path;
    o.ann_probe = probe;
    return o;
}

// Random queries with varied k, exclusions, allow and deny lists.
inline RecommendOptions random_options(std::mt19937& rng, uint32_t items, uint32_t i) {
    RecommendOptions o;
    const uint32_t ks[] = {1, 10, 50, items + 5};
    o.k = ks[rng() % 4];
    o.exclude_inputs = rng() % 4 != 0;
    if (rng() % 4 == 0)
        for (int d = 0; d < 30; ++d) o.deny.emplace_back(rng() % items);
    if (i % 5 == 1)  // a short allow list
        for (int a = 0; a < 25; ++a) o.allow.emplace_back(rng() % items);
    if (i % 5 == 3)  // a long one: most items
        for (uint32_t a = 0; a < items; ++a)
            if (rng() % 8 != 0) o.allow.emplace_back(a);
    return o;
}

inline void expect_same(const Recommendations& got, const Recommendations& want, uint32_t query) {
    ASSERT_EQ(got.items.size(), want.items.size()) << "query " << query;
    for (size_t r = 0; r < want.items.size(); ++r) {
        ASSERT_EQ(got.items[r].id, want.items[r].id) << "query " << query << " rank " << r;
        ASSERT_EQ(got.items[r].score, want.items[r].score) << "query " << query << " rank " << r;
    }
}

// `queries` random queries (up to `per_query` items, every third weighted; random_options),
// one by one and then as one batch: `got` answers each exactly as `want` does.
inline void expect_same_answers(const Recommender& got, const Recommender& want, uint32_t items,
                                uint32_t queries, uint32_t per_query, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<Query> batch;
    std::vector<Recommendations> wanted;
    for (uint32_t i = 0; i < queries; ++i) {
        Query q;
        q.items = testing::random_items(rng, items, per_query, i % 3 == 0);
        q.options = random_options(rng, items, i);
        wanted.push_back(want.recommend(q.items, q.options));
        expect_same(got.recommend(q.items, q.options), wanted.back(), i);
        batch.push_back(q);
    }
    const std::vector<Recommendations> answers = got.recommend_batch(batch);
    ASSERT_EQ(answers.size(), wanted.size());
    for (uint32_t i = 0; i < answers.size(); ++i) expect_same(answers[i], wanted[i], i);
}

}  // namespace sparsenet::testing::ann
