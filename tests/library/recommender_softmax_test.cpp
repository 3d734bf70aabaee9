// SoftMax output layers through the ANN index and fp16 screening (docs/serving.md, "SoftMax output
// layers"): both rank the items by logit z_j = h . w_j + b_j, which orders them as the
// probabilities do, and answer the logits (Recommendations::logits). An exhaustive FP32 index and
// the screen give the exact path's items in its order, with allow, deny and the query's own items
// excluded, single and batched; each logit answer is the probabilities' answer (exp of the logits'
// differences is the ratio of the probabilities); an approximate index builds and answers too.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "library/ann_test_util.h"
#include "library/library_test_util.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::recommender_config;
using testing::ann::save_network;
using testing::ann::with_ann;

constexpr uint32_t kItems = 300;

using SoftmaxRecommender = testing::ann::Fixture;

// Queries with filters, k at most 20 (the order of probabilities is the logits' wherever no two
// logits round to one probability: never in these models' top 20).
std::vector<Query> queries(uint32_t count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<Query> out;
    for (uint32_t i = 0; i < count; ++i) {
        Query q;
        q.items = testing::random_items(rng, kItems, 12, i % 3 == 0);
        q.options.k = std::vector<uint32_t>{1, 10, 20}[i % 3];
        q.options.exclude_inputs = i % 4 != 0;
        if (i % 5 == 1)
            for (int d = 0; d < 30; ++d) q.options.deny.emplace_back(rng() % kItems);
        if (i % 5 == 2)
            for (int a = 0; a < 25; ++a) q.options.allow.emplace_back(rng() % kItems);
        out.push_back(q);
    }
    return out;
}

// `got` (logits) answers the items of `want` (probabilities) in its order, and the logits'
// differences give the probabilities' ratios.
void expect_logits_of(const Recommendations& got, const Recommendations& want, size_t query) {
    EXPECT_TRUE(got.logits) << "query " << query;
    EXPECT_FALSE(want.logits) << "query " << query;
    ASSERT_EQ(got.items.size(), want.items.size()) << "query " << query;
    for (size_t r = 0; r < want.items.size(); ++r) {
        ASSERT_EQ(got.items[r].id, want.items[r].id) << "query " << query << " rank " << r;
        const double ratio = double(want.items[r].score) / double(want.items[0].score);
        const double from_logits = std::exp(double(got.items[r].score) - got.items[0].score);
        EXPECT_NEAR(from_logits, ratio, 1e-5 * ratio + 1e-30) << "query " << query;
    }
}

TEST_F(SoftmaxRecommender, AnExhaustiveIndexAnswersTheExactItemsWithTheirLogits) {
    const std::string model =
        save_network(recommender_config("SoftMax", 24), kItems, dir.file("softmax.nc"));
    AnnIndexOptions o;
    o.kind = "flat";
    o.vectors = "fp32";
    build_ann_index(model, dir.file("flat.ann"), o);
    const Recommender exact(model);
    const Recommender ann(model, with_ann(dir.file("flat.ann")));
    EXPECT_TRUE(ann.ann());
    const std::vector<Query> qs = queries(40, 7);
    std::vector<Recommendations> wanted;
    for (size_t i = 0; i < qs.size(); ++i) {
        wanted.push_back(exact.recommend(qs[i].items, qs[i].options));
        expect_logits_of(ann.recommend(qs[i].items, qs[i].options), wanted.back(), i);
    }
    const std::vector<Recommendations> batch = ann.recommend_batch(qs);
    ASSERT_EQ(batch.size(), qs.size());
    for (size_t i = 0; i < qs.size(); ++i) expect_logits_of(batch[i], wanted[i], i);
}

TEST_F(SoftmaxRecommender, Fp16ScreeningRanksByLogits) {
    const std::string model =
        save_network(recommender_config("SoftMax", 24), kItems, dir.file("softmax.nc"));
    RecommenderOptions screened_options;
    screened_options.fp16_screening = true;
    const Recommender exact(model);
    const Recommender screened(model, screened_options);
    EXPECT_TRUE(screened.screening());
    const std::vector<Query> qs = queries(30, 11);
    for (size_t i = 0; i < qs.size(); ++i) {
        expect_logits_of(screened.recommend(qs[i].items, qs[i].options),
                         exact.recommend(qs[i].items, qs[i].options), i);
    }
}

// The default index (ivf, fp16 vectors) of a SoftMax model: built, matched to its model by the
// fingerprint, answering logits; most of the exact top 10 among its answers.
TEST_F(SoftmaxRecommender, AnApproximateIndexBuildsAndAnswersLogits) {
    const std::string model =
        save_network(recommender_config("SoftMax", 24), kItems, dir.file("softmax.nc"));
    build_ann_index(model, dir.file("ivf.ann"), AnnIndexOptions{});
    const Recommender exact(model);
    const Recommender ann(model, with_ann(dir.file("ivf.ann")));
    size_t found = 0, wanted = 0;
    for (const Query& q : queries(30, 13)) {
        const Recommendations got = ann.recommend(q.items, q.options);
        const Recommendations want = exact.recommend(q.items, q.options);
        EXPECT_TRUE(got.logits);
        for (const Recommendation& w : want.items) {
            ++wanted;
            for (const Recommendation& g : got.items) found += g.id == w.id;
        }
    }
    EXPECT_GE(double(found), 0.9 * double(wanted)) << found << " of " << wanted;
}

}  // namespace
}  // namespace sparsenet
