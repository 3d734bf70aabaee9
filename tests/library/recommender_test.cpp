// Recommender behaviour: ranking against Predictor's scores, exclusion of the query's items,
// allow and deny lists, weights, names and ids, unknown items (error or ignore), batch calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "library/library_test_util.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/predictor.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

constexpr uint32_t kItems = 60;

struct Oracle {
    uint32_t id;
    float score;
};

class RecommenderTest : public ::testing::Test {
  protected:
    void SetUp() override {
        model_ = dir_.file("model.nc");
        index_ = dir_.file("features.index");
        Network net = testing::trained_network(kItems, 24, 400, 3);
        net.save(model_);
        names_ = testing::item_names(kItems);
        write_index(index_, names_);
        oracle_net_ = std::make_unique<Network>(Network::load(model_));
    }

    Recommender recommender(RecommenderOptions options = {}) const {
        options.features_index = index_;
        return Recommender(model_, options);
    }

    // Every output score for one user, through Predictor (the engine's batch path).
    std::vector<float> scores(const std::map<uint32_t, float>& items) const {
        Dataset in;
        in.name = "in";
        in.rows = 1;
        in.cols = kItems;
        bool weighted = false;
        for (const auto& [id, w] : items) {
            in.indices.push_back(id);
            in.values.push_back(w);
            weighted = weighted || w != 1.0f;
        }
        if (!weighted) in.values.clear();
        in.offsets.push_back(in.indices.size());
        Predictor predictor(*oracle_net_, {{"in", &in}});
        return predictor.scores(0, 1);
    }

    // The expected ranking: best score first, ties by lower id, skipping `excluded`, only
    // `allowed` when it is not empty.
    std::vector<Oracle> expected(const std::map<uint32_t, float>& items, uint32_t k,
                                 const std::vector<uint32_t>& excluded,
                                 const std::vector<uint32_t>& allowed = {}) const {
        const std::vector<float> s = scores(items);
        std::vector<Oracle> all;
        for (uint32_t c = 0; c < s.size(); ++c) {
            if (std::count(excluded.begin(), excluded.end(), c)) continue;
            if (!allowed.empty() && !std::count(allowed.begin(), allowed.end(), c)) continue;
            all.push_back({c, s[c]});
        }
        std::sort(all.begin(), all.end(), [](const Oracle& a, const Oracle& b) {
            return a.score > b.score || (a.score == b.score && a.id < b.id);
        });
        if (all.size() > k) all.resize(k);
        return all;
    }

    void expect_ranking(const Recommendations& got, const std::vector<Oracle>& want) const {
        ASSERT_EQ(got.items.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_EQ(got.items[i].id, want[i].id) << "rank " << i;
            // Within 1e-5 relative, not bit-equal: the Recommender and the Predictor may run the
            // BLAS with different thread counts, whose blockings round differently (on the GPU
            // machine's 16 cores scores differed by up to 4e-7 (4e-6 relative); equal on 2 cores).
            EXPECT_NEAR(got.items[i].score, want[i].score, 1e-5f * std::fabs(want[i].score))
                << "rank " << i;
            EXPECT_EQ(got.items[i].name, names_[got.items[i].id]) << "rank " << i;
        }
    }

    testing::TempDir dir_;
    std::string model_, index_;
    std::vector<std::string> names_;
    std::unique_ptr<Network> oracle_net_;
};

TEST_F(RecommenderTest, RanksLikeThePredictorAndExcludesTheQueryItems) {
    const Recommender r = recommender();
    EXPECT_EQ(r.input_items(), kItems);
    EXPECT_EQ(r.output_items(), kItems);
    std::mt19937 rng(7);
    for (int t = 0; t < 20; ++t) {
        std::map<uint32_t, float> items;
        std::vector<ItemRef> query;
        std::vector<uint32_t> ids;
        for (const ItemRef& item : testing::random_items(rng, kItems, 8, false)) {
            items[uint32_t(item.id)] = 1.0f;
            query.push_back(item);
        }
        for (const auto& kv : items) ids.push_back(kv.first);
        const Recommendations got = r.recommend(query, {});
        expect_ranking(got, expected(items, 10, ids));
        for (const Recommendation& rec : got.items) EXPECT_EQ(items.count(rec.id), 0u);
        EXPECT_TRUE(got.unknown.empty());
    }
}

TEST_F(RecommenderTest, IncludesTheQueryItemsWhenAsked) {
    const Recommender r = recommender();
    RecommendOptions o;
    o.exclude_inputs = false;
    o.k = kItems;  // every item, so the query's own items must be among them
    const Recommendations got = r.recommend({5, 9, 31}, o);
    expect_ranking(got, expected({{5, 1.0f}, {9, 1.0f}, {31, 1.0f}}, kItems, {}));
    for (uint32_t id : {5u, 9u, 31u}) {
        EXPECT_TRUE(std::any_of(got.items.begin(), got.items.end(),
                                [&](const Recommendation& x) { return x.id == id; }));
    }
}

TEST_F(RecommenderTest, AllowAndDenyLists) {
    const Recommender r = recommender();
    RecommendOptions deny;
    deny.deny = {names_[0], 7, 8, 9};
    expect_ranking(r.recommend({3, 4}, deny),
                   expected({{3, 1.0f}, {4, 1.0f}}, 10, {3, 4, 0, 7, 8, 9}));

    RecommendOptions allow;
    allow.k = 4;
    allow.allow = {10, 11, names_[12], 13, 14, 15, 3};  // 3 is also a query item: still excluded
    const Recommendations got = r.recommend({3, 4}, allow);
    expect_ranking(got, expected({{3, 1.0f}, {4, 1.0f}}, 4, {3, 4}, {10, 11, 12, 13, 14, 15, 3}));

    // Allow and deny together; fewer allowed items than k gives fewer results.
    RecommendOptions both;
    both.k = 10;
    both.allow = {20, 21, 22};
    both.deny = {21};
    expect_ranking(r.recommend({3}, both), expected({{3, 1.0f}}, 10, {3, 21}, {20, 21, 22}));
    EXPECT_EQ(r.recommend({3}, both).items.size(), 2u);
}

TEST_F(RecommenderTest, WeightsAreTheInputValues) {
    const Recommender r = recommender();
    const Recommendations weighted = r.recommend({{2, 3.0f}, {17, 0.5f}, {40, 1.0f}}, {});
    expect_ranking(weighted, expected({{2, 3.0f}, {17, 0.5f}, {40, 1.0f}}, 10, {2, 17, 40}));
    // The weights reach the network: the scores differ from the unweighted query's.
    const std::vector<float> a = scores({{2, 3.0f}, {17, 0.5f}, {40, 1.0f}});
    const std::vector<float> b = scores({{2, 1.0f}, {17, 1.0f}, {40, 1.0f}});
    EXPECT_NE(a, b);
    // A duplicate counts once, with its largest weight.
    std::string why;
    EXPECT_TRUE(testing::same_recommendations(
        r.recommend({{2, 1.0f}, {17, 0.5f}, {2, 3.0f}, {40, 1.0f}, {40, 0.25f}}, {}), weighted,
        &why))
        << why;
}

TEST_F(RecommenderTest, NamesAndIdsNameTheSameItems) {
    const Recommender r = recommender();
    EXPECT_TRUE(r.has_names());
    EXPECT_EQ(r.id_of(names_[2]), 2u);
    EXPECT_EQ(r.name_of(1), names_[1]);
    std::string why;
    EXPECT_TRUE(testing::same_recommendations(r.recommend({names_[1], names_[2], names_[30]}, {}),
                                              r.recommend({1, 2, 30}, {}), &why))
        << why;
    // Without a features index, ids work and results have no names.
    const Recommender plain(model_);
    EXPECT_FALSE(plain.has_names());
    const Recommendations p = plain.recommend({1, 2, 30}, {});
    ASSERT_FALSE(p.items.empty());
    for (const Recommendation& x : p.items) EXPECT_EQ(x.name, "");
    try {
        plain.recommend({"item-4"}, {});
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find("features index"), std::string::npos) << e.what();
    }
}

TEST_F(RecommenderTest, UnknownItemsAreErrorsListingThem) {
    const Recommender r = recommender();
    RecommendOptions o;
    o.deny = {"no-such-deny"};
    o.allow = {1, 2, int64_t(kItems) + 5};
    try {
        r.recommend({"no-such-item", 3, int64_t(kItems), -1, "also missing"}, o);
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kData);
        const std::string m = e.what();
        for (const std::string& s :
             {std::string("'no-such-item'"), std::string("'also missing'"), std::to_string(kItems),
              std::string("-1"), std::string("'no-such-deny'"), std::to_string(kItems + 5),
              std::string("4 unknown items in the query"), std::string("allow list"),
              std::string("deny list")}) {
            EXPECT_NE(m.find(s), std::string::npos) << "missing " << s << " in: " << m;
        }
    }
    EXPECT_THROW(r.id_of("no-such-item"), Error);
}

TEST_F(RecommenderTest, IgnoreUnknownSkipsThemAndReportsThem) {
    const Recommender r = recommender();
    RecommendOptions o;
    o.ignore_unknown = true;
    o.deny = {"nope", 9};
    const Recommendations got = r.recommend({"ghost", 3, 999, names_[4]}, o);
    RecommendOptions clean;
    clean.deny = {9};
    std::string why;
    Recommendations want = r.recommend({3, 4}, clean);
    EXPECT_EQ(got.unknown, (std::vector<std::string>{"ghost", "999", "nope"}));
    want.unknown = got.unknown;
    EXPECT_TRUE(testing::same_recommendations(got, want, &why)) << why;
}

TEST_F(RecommenderTest, BatchMatchesSingleCalls) {
    std::mt19937 rng(3);
    std::vector<Query> queries;
    for (int i = 0; i < 37; ++i) {
        Query q;
        q.items = testing::random_items(rng, kItems, 10, i % 3 == 0);
        q.options.k = 1 + rng() % 15;
        if (i % 4 == 1) q.options.deny = {int(rng() % kItems), int(rng() % kItems)};
        if (i % 5 == 2) q.options.allow = {1, 2, 3, 5, 8, 13, 21, 34, 55};
        if (i % 7 == 3) q.options.exclude_inputs = false;
        if (i % 6 == 4) {
            q.items.push_back("unknown-name");
            q.options.ignore_unknown = true;
        }
        queries.push_back(q);
    }
    // Batches of up to 4 rows take the same products as single calls: identical results.
    RecommenderOptions small;
    small.max_batch = 4;
    const Recommender r4 = recommender(small);
    const std::vector<Recommendations> b4 = r4.recommend_batch(queries);
    ASSERT_EQ(b4.size(), queries.size());
    for (size_t i = 0; i < queries.size(); ++i) {
        std::string why;
        EXPECT_TRUE(testing::same_recommendations(
            b4[i], r4.recommend(queries[i].items, queries[i].options), &why))
            << "query " << i << ": " << why;
    }
    // Larger batches go through BLAS, whose sums may differ in the last bits: the same scores at
    // every rank to rounding, the same items unless two scores tie to rounding.
    RecommenderOptions big;
    big.max_batch = 16;
    const Recommender r16 = recommender(big);
    const std::vector<Recommendations> b16 = r16.recommend_batch(queries);
    ASSERT_EQ(b16.size(), queries.size());
    for (size_t i = 0; i < queries.size(); ++i) {
        const Recommendations& single = b4[i];
        ASSERT_EQ(b16[i].items.size(), single.items.size()) << "query " << i;
        EXPECT_EQ(b16[i].unknown, single.unknown);
        for (size_t j = 0; j < single.items.size(); ++j) {
            const float s = single.items[j].score;
            EXPECT_NEAR(b16[i].items[j].score, s, 1e-6f + 1e-5f * std::fabs(s));
            if (b16[i].items[j].id != single.items[j].id) {
                const bool tie = (j > 0 && std::fabs(single.items[j - 1].score - s) <= 1e-5f) ||
                                 (j + 1 < single.items.size() &&
                                  std::fabs(single.items[j + 1].score - s) <= 1e-5f);
                EXPECT_TRUE(tie) << "query " << i << " rank " << j;
            }
        }
    }
    EXPECT_TRUE(r16.recommend_batch({}).empty());
}

TEST_F(RecommenderTest, BatchValidatesEveryQueryFirst) {
    const Recommender r = recommender();
    std::vector<Query> queries(3);
    queries[0].items = {1, 2};
    queries[1].items = {"missing"};
    queries[2].items = {3};
    try {
        r.recommend_batch(queries);
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kData);
        EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos) << e.what();
    }
}

TEST_F(RecommenderTest, RanksAnotherLayerByName) {
    RecommenderOptions o;
    o.output_layer = "Hidden";
    const Recommender r = recommender(o);
    EXPECT_EQ(r.output_items(), 24u);
    RecommendOptions all;
    all.k = 24;
    all.exclude_inputs = false;
    const Recommendations got = r.recommend({1, 2}, all);
    Dataset in;
    in.name = "in";
    in.rows = 1;
    in.cols = kItems;
    in.indices = {1, 2};
    in.offsets.push_back(2);
    Predictor predictor(*oracle_net_, {{"in", &in}});
    const std::vector<float> hidden = predictor.scores(0, 1, "Hidden");
    ASSERT_EQ(got.items.size(), 24u);
    for (const Recommendation& x : got.items)  // tolerance: see expect_ranking
        EXPECT_NEAR(x.score, hidden[x.id], 1e-5f * std::fabs(hidden[x.id]));
}

TEST_F(RecommenderTest, BadArgumentsAreErrorsNamingThem) {
    auto category = [](auto&& f) {
        try {
            f();
        } catch (const Error& e) {
            return e.category();
        }
        return ErrorCategory::kInternal;  // nothing thrown
    };
    const Recommender r = recommender();
    RecommendOptions zero;
    zero.k = 0;
    EXPECT_EQ(category([&] { r.recommend({1}, zero); }), ErrorCategory::kUsage);
    EXPECT_EQ(category([&] { r.recommend({{1, std::nanf("")}}, {}); }), ErrorCategory::kUsage);
    RecommenderOptions bad;
    bad.threads_per_call = 0;
    EXPECT_EQ(category([&] { recommender(bad); }), ErrorCategory::kUsage);
    RecommenderOptions layer;
    layer.output_layer = "Input";
    EXPECT_EQ(category([&] { recommender(layer); }), ErrorCategory::kUsage);
    EXPECT_EQ(category([&] { Recommender(dir_.file("missing.nc")); }), ErrorCategory::kIo);
    // An index with more labels than the model has items is not this model's index.
    write_index(dir_.file("big.index"), testing::item_names(kItems + 1));
    RecommenderOptions big;
    big.features_index = dir_.file("big.index");
    EXPECT_EQ(category([&] { Recommender(model_, big); }), ErrorCategory::kData);
    // A k beyond the item count returns every remaining item.
    RecommendOptions huge;
    huge.k = 1000000;
    EXPECT_EQ(r.recommend({1, 2, 3}, huge).items.size(), kItems - 3);
}

}  // namespace
}  // namespace sparsenet
