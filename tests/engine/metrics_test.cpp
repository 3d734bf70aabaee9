// Ranking metrics (evaluate_ranking): hand-computed cases for every metric, the conventions
// (slot order is the ranking, unused slots, users without held-out items, coverage over the
// evaluated users), the errors, and random scores where the test recomputes every metric from
// the dense score matrix by a plain sort, beside the TopK built by the test itself and the TopK
// of the CPU backend's top_k op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/metrics.h"
#include "sparsenet/predictor.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A CSR dataset from explicit rows (sorted here, as the CSR invariant requires).
Dataset rows_of(std::vector<std::vector<uint32_t>> rows, uint32_t cols) {
    Dataset d;
    d.name = "heldout";
    d.rows = rows.size();
    d.cols = cols;
    for (auto& r : rows) {
        std::sort(r.begin(), r.end());
        d.indices.insert(d.indices.end(), r.begin(), r.end());
        d.offsets.push_back(d.indices.size());
    }
    return d;
}

// A TopK from explicit lists (shorter lists get unused slots); scores descend by slot.
TopK lists_of(const std::vector<std::vector<uint32_t>>& lists, uint32_t k) {
    TopK t;
    t.rows = lists.size();
    t.k = k;
    t.scores.assign(t.rows * k, -kInf);
    t.indices.assign(t.rows * k, kNone);
    for (size_t r = 0; r < lists.size(); ++r) {
        for (size_t i = 0; i < lists[r].size(); ++i) {
            t.indices[r * k + i] = lists[r][i];
            t.scores[r * k + i] = 1.0f - 0.01f * float(i);
        }
    }
    return t;
}

RankingOptions at(std::vector<uint32_t> ks, uint32_t items, bool per_user = false) {
    RankingOptions o;
    o.ks = std::move(ks);
    o.items = items;
    o.per_user = per_user;
    return o;
}

// Five users, ten items. Row 2 has no held-out items (not evaluated, its items not covered);
// row 1's list has one item and unused slots; row 4 has no hit at any K.
class HandComputed : public ::testing::Test {
  protected:
    const Dataset heldout = rows_of({{1, 0, 5}, {2}, {}, {9}, {6, 7}}, 10);
    const TopK top = lists_of({{3, 1, 7, 0}, {2}, {4, 5, 6, 8}, {5, 9, 2, 3}, {0, 1, 2, 3}}, 4);
    const double l3 = std::log2(3.0), l5 = std::log2(5.0);
};

TEST_F(HandComputed, EveryMetricAtTwoCutOffs) {
    const RankingReport r = evaluate_ranking(top, heldout, at({2, 4}, 10));
    EXPECT_EQ(r.rows, 5u);
    EXPECT_EQ(r.users, 4u);
    EXPECT_EQ(r.items, 10u);
    ASSERT_EQ(r.at.size(), 2u);

    // K = 2. Row 0: [3, 1] hit at 2 of |H| = 3. Row 1: [2] hit at 1 of 1. Row 3: [5, 9] hit at 2
    // of 1. Row 4: [0, 1] no hit of 2.
    const MetricsAtK& k2 = r.at_k(2);
    EXPECT_EQ(k2.k, 2u);
    EXPECT_NEAR(k2.recall, (1.0 / 3 + 1 + 1 + 0) / 4, 1e-12);
    EXPECT_NEAR(k2.nrecall, (1.0 / 2 + 1 + 1 + 0) / 4, 1e-12);
    EXPECT_NEAR(k2.precision, (0.5 + 0.5 + 0.5 + 0) / 4, 1e-12);
    EXPECT_NEAR(k2.ndcg, ((1 / l3) / (1 + 1 / l3) + 1 + (1 / l3) / 1 + 0) / 4, 1e-12);
    // AP@2: row 0 (1/2)/min(2,3); row 1 (1/1)/1; row 3 (1/2)/1; row 4 0.
    EXPECT_NEAR(k2.map, (0.25 + 1 + 0.5 + 0) / 4, 1e-12);
    EXPECT_NEAR(k2.hit_rate, 0.75, 1e-12);
    // Top-2 items of the evaluated rows: {3,1} {2} {5,9} {0,1} = {0,1,2,3,5,9}; row 2's 4 and 5
    // are not counted (5 is covered through row 3 anyway).
    EXPECT_EQ(k2.covered_items, 6u);
    EXPECT_NEAR(k2.coverage, 0.6, 1e-12);

    // K = 4. Row 0: [3, 1, 7, 0] hits at 2 and 4, |H| = 3. Rows 1, 3 as above (row 1's list is
    // one item long), row 4: [0, 1, 2, 3] no hit.
    const MetricsAtK& k4 = r.at_k(4);
    EXPECT_NEAR(k4.recall, (2.0 / 3 + 1 + 1 + 0) / 4, 1e-12);
    EXPECT_NEAR(k4.nrecall, (2.0 / 3 + 1 + 1 + 0) / 4, 1e-12);
    EXPECT_NEAR(k4.precision, (2.0 / 4 + 1.0 / 4 + 1.0 / 4 + 0) / 4, 1e-12);
    EXPECT_NEAR(k4.ndcg, ((1 / l3 + 1 / l5) / (1 + 1 / l3 + 0.5) + 1 + 1 / l3 + 0) / 4, 1e-12);
    // AP@4 of row 0: (P@2 + P@4) / min(4, 3) = (1/2 + 2/4) / 3 = 1/3.
    EXPECT_NEAR(k4.map, (1.0 / 3 + 1 + 0.5 + 0) / 4, 1e-12);
    EXPECT_NEAR(k4.hit_rate, 0.75, 1e-12);
    // {3,1,7,0} {2} {5,9,2,3} {0,1,2,3} = {0,1,2,3,5,7,9}; row 2's 4, 6 and 8 are not.
    EXPECT_EQ(k4.covered_items, 7u);
    EXPECT_NEAR(k4.coverage, 0.7, 1e-12);
}

TEST_F(HandComputed, PerUserResultsCoverTheEvaluatedRowsOnly) {
    const RankingReport r = evaluate_ranking(top, heldout, at({4, 2}, 10, true));
    ASSERT_EQ(r.per_user.size(), 4u);
    EXPECT_EQ(r.per_user[0].row, 0u);
    EXPECT_EQ(r.per_user[1].row, 1u);
    EXPECT_EQ(r.per_user[2].row, 3u);  // row 2 has no held-out item
    EXPECT_EQ(r.per_user[3].row, 4u);
    EXPECT_EQ(r.per_user[0].heldout, 3u);
    EXPECT_EQ(r.per_user[3].heldout, 2u);
    // Same order as the ks asked for: K = 4 first.
    ASSERT_EQ(r.at[0].k, 4u);
    const UserMetricsAtK& u0k4 = r.per_user[0].at[0];
    EXPECT_EQ(u0k4.hits, 2u);
    EXPECT_NEAR(u0k4.recall, 2.0 / 3, 1e-12);
    EXPECT_NEAR(u0k4.nrecall, 2.0 / 3, 1e-12);
    EXPECT_NEAR(u0k4.precision, 0.5, 1e-12);
    EXPECT_NEAR(u0k4.ndcg, (1 / l3 + 1 / l5) / (1 + 1 / l3 + 0.5), 1e-12);
    EXPECT_NEAR(u0k4.ap, 1.0 / 3, 1e-12);
    const UserMetricsAtK& u0k2 = r.per_user[0].at[1];
    EXPECT_EQ(u0k2.hits, 1u);
    EXPECT_NEAR(u0k2.nrecall, 0.5, 1e-12);
    EXPECT_NEAR(u0k2.ap, 0.25, 1e-12);
    const UserMetricsAtK& u1k4 = r.per_user[1].at[0];  // a one-item list at K = 4
    EXPECT_EQ(u1k4.hits, 1u);
    EXPECT_NEAR(u1k4.precision, 0.25, 1e-12);
    EXPECT_NEAR(u1k4.ndcg, 1.0, 1e-12);
    EXPECT_EQ(r.per_user[3].at[0].hits, 0u);
    EXPECT_EQ(r.per_user[3].at[0].ndcg, 0.0);
    // Without per_user nothing is kept.
    EXPECT_TRUE(evaluate_ranking(top, heldout, at({4}, 10)).per_user.empty());
}

TEST_F(HandComputed, MapRewardsEarlyHits) {
    // One user, |H| = 2, K = 4: hits at positions 1 and 3 -> AP = (1/1 + 2/3) / 2 = 5/6;
    // hits at 3 and 4 -> (1/3 + 2/4) / 2 = 5/12. Recall is 1 for both.
    const Dataset h = rows_of({{4, 6}, {4, 6}}, 8);
    const TopK t = lists_of({{4, 0, 6, 1}, {0, 1, 4, 6}}, 4);
    const RankingReport r = evaluate_ranking(t, h, at({4}, 8, true));
    EXPECT_NEAR(r.per_user[0].at[0].ap, 5.0 / 6, 1e-12);
    EXPECT_NEAR(r.per_user[1].at[0].ap, 5.0 / 12, 1e-12);
    EXPECT_EQ(r.per_user[0].at[0].recall, 1.0);
    EXPECT_EQ(r.per_user[1].at[0].recall, 1.0);
    EXPECT_NEAR(r.at_k(4).map, (5.0 / 6 + 5.0 / 12) / 2, 1e-12);
}

TEST(Metrics, SlotOrderIsTheRankingWhateverTheScores) {
    // Two items with the same score: the TopK's slot order decides (the backend puts the lower
    // column first; a recs file keeps its own order), so swapping the slots moves the hit.
    const Dataset h = rows_of({{2}}, 3);
    TopK first = lists_of({{1, 2}}, 2), second = lists_of({{2, 1}}, 2);
    first.scores = {0.5f, 0.5f};
    second.scores = {0.5f, 0.5f};
    EXPECT_EQ(evaluate_ranking(first, h, at({1}, 3)).at_k(1).recall, 0.0);
    EXPECT_EQ(evaluate_ranking(second, h, at({1}, 3)).at_k(1).recall, 1.0);
}

TEST(Metrics, NoHeldOutItemsMeansNoUsers) {
    const Dataset h = rows_of({{}, {}}, 4);
    const RankingReport r = evaluate_ranking(lists_of({{0, 1}, {2, 3}}, 2), h, at({2}, 4));
    EXPECT_EQ(r.users, 0u);
    EXPECT_EQ(r.at_k(2).recall, 0.0);
    EXPECT_EQ(r.at_k(2).ndcg, 0.0);
    EXPECT_EQ(r.at_k(2).covered_items, 0u);  // nobody evaluated: nothing recommended
}

TEST(Metrics, CatalogueDefaultsToTheHeldOutWidth) {
    const Dataset h = rows_of({{0}}, 5);
    const RankingReport r = evaluate_ranking(lists_of({{0, 1}}, 2), h, at({2}, 0));
    EXPECT_EQ(r.items, 5u);
    EXPECT_NEAR(r.at_k(2).coverage, 2.0 / 5, 1e-12);
}

TEST(Metrics, IndexedHeldOutIsExpanded) {
    Dataset h = rows_of({{1}, {3}}, 4);
    h.example_rows = {1, 0, 1};  // examples: {3}, {1}, {3}
    const TopK t = lists_of({{3, 0}, {0, 2}, {2, 3}}, 2);
    const RankingReport r = evaluate_ranking(t, h, at({1, 2}, 4));
    EXPECT_EQ(r.rows, 3u);
    EXPECT_EQ(r.users, 3u);
    EXPECT_NEAR(r.at_k(1).recall, 1.0 / 3, 1e-12);  // only example 0 hits at 1
    EXPECT_NEAR(r.at_k(2).recall, 2.0 / 3, 1e-12);  // and example 2 at 2
}

TEST(Metrics, SingleKFormAgrees) {
    const Dataset h = rows_of({{1, 0, 5}, {2}, {}, {9}, {6, 7}}, 10);
    const TopK t = lists_of({{3, 1, 7, 0}, {2}, {4, 5, 6, 8}, {5, 9, 2, 3}, {0, 1, 2, 3}}, 4);
    const RankingMetrics m = ranking_metrics(t, h, 4);
    EXPECT_EQ(m.users, 4u);
    EXPECT_NEAR(m.recall, (2.0 / 3 + 1 + 1 + 0) / 4, 1e-12);
    EXPECT_NEAR(m.precision, 0.25, 1e-12);
}

void expect_error(const std::function<void()>& f, ErrorCategory category,
                  const std::string& mention) {
    try {
        f();
        ADD_FAILURE() << "no error; expected one mentioning '" << mention << "'";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), category) << e.what();
        EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
}

TEST(Metrics, BadArgumentsAreErrors) {
    const Dataset h = rows_of({{1}, {2}}, 4);
    const TopK t = lists_of({{1, 2}, {2, 3}}, 2);
    expect_error([&] { evaluate_ranking(t, h, at({3}, 4)); }, ErrorCategory::kUsage, "K = 3");
    expect_error([&] { evaluate_ranking(t, h, at({0}, 4)); }, ErrorCategory::kUsage, "K = 0");
    expect_error([&] { evaluate_ranking(t, h, at({2, 1, 2}, 4)); }, ErrorCategory::kUsage, "twice");
    expect_error([&] { evaluate_ranking(t, h, at({}, 4)); }, ErrorCategory::kUsage, "K");
    expect_error([&] { evaluate_ranking(t, rows_of({{1}}, 4), at({1}, 4)); }, ErrorCategory::kData,
                 "rows");
    expect_error(
        [&] {
            evaluate_ranking(lists_of({{1, 1}, {2, 3}}, 2), h, at({1}, 4));
        },
        ErrorCategory::kData, "twice");
    expect_error([&] { evaluate_ranking(t, h, at({1}, 3)); }, ErrorCategory::kData,
                 "catalogue");  // item 3 of row 1 is not below 3
    expect_error(
        [&] {
            evaluate_ranking(t, rows_of({{1}, {2}}, 9), at({1}, 4));
        },
        ErrorCategory::kData, "columns");
    expect_error([&] { metric_value(MetricsAtK{}, "f1"); }, ErrorCategory::kUsage, "f1");
    expect_error([&] { RankingReport{}.at_k(5); }, ErrorCategory::kUsage, "K = 5");
}

// ---- random scores: an independent computation from the dense score matrix ----

struct Reference {
    uint64_t users = 0;
    double recall = 0, nrecall = 0, precision = 0, ndcg = 0, map = 0, hit_rate = 0, coverage = 0;
};

// Ranks every non-excluded item of each row by (score descending, column ascending) with a full
// sort, then applies the definitions literally.
Reference reference_metrics(const std::vector<float>& scores, uint64_t rows, uint32_t items,
                            const Dataset& exclude, const Dataset& heldout, uint32_t k) {
    Reference ref;
    std::set<uint32_t> covered;
    for (uint64_t r = 0; r < rows; ++r) {
        std::set<uint32_t> held(heldout.indices.begin() + heldout.offsets[r],
                                heldout.indices.begin() + heldout.offsets[r + 1]);
        if (held.empty()) continue;
        std::set<uint32_t> excluded(exclude.indices.begin() + exclude.offsets[r],
                                    exclude.indices.begin() + exclude.offsets[r + 1]);
        std::vector<uint32_t> ranked;
        for (uint32_t c = 0; c < items; ++c) {
            if (!excluded.count(c)) ranked.push_back(c);
        }
        std::sort(ranked.begin(), ranked.end(), [&](uint32_t a, uint32_t b) {
            const float sa = scores[r * items + a], sb = scores[r * items + b];
            return sa != sb ? sa > sb : a < b;
        });
        if (ranked.size() > k) ranked.resize(k);
        ref.users++;
        double hits = 0, dcg = 0, ap = 0;
        for (size_t i = 0; i < ranked.size(); ++i) {
            covered.insert(ranked[i]);
            if (!held.count(ranked[i])) continue;
            hits += 1;
            dcg += 1.0 / std::log2(double(i + 1) + 1.0);  // position i + 1
            double hits_to_here = 0;                      // recounted: Precision@(i+1)
            for (size_t j = 0; j <= i; ++j) hits_to_here += held.count(ranked[j]) ? 1 : 0;
            ap += hits_to_here / double(i + 1);
        }
        const double m = double(std::min<size_t>(k, held.size()));
        double idcg = 0;
        for (size_t i = 1; i <= std::min<size_t>(k, held.size()); ++i) {
            idcg += 1.0 / std::log2(double(i) + 1.0);
        }
        ref.recall += hits / double(held.size());
        ref.nrecall += hits / m;
        ref.precision += hits / double(k);
        ref.ndcg += dcg / idcg;
        ref.map += ap / m;
        ref.hit_rate += hits > 0 ? 1 : 0;
    }
    const double n = double(ref.users);
    ref.recall /= n;
    ref.nrecall /= n;
    ref.precision /= n;
    ref.ndcg /= n;
    ref.map /= n;
    ref.hit_rate /= n;
    ref.coverage = double(covered.size()) / double(items);
    return ref;
}

// The TopK the test builds itself from the scores (no library code): the same full sort.
TopK sorted_top_k(const std::vector<float>& scores, uint64_t rows, uint32_t items,
                  const Dataset& exclude, uint32_t k) {
    TopK t;
    t.rows = rows;
    t.k = k;
    t.scores.assign(rows * k, -kInf);
    t.indices.assign(rows * k, kNone);
    for (uint64_t r = 0; r < rows; ++r) {
        std::vector<uint32_t> ranked;
        for (uint32_t c = 0; c < items; ++c) {
            if (!std::binary_search(exclude.indices.begin() + exclude.offsets[r],
                                    exclude.indices.begin() + exclude.offsets[r + 1], c)) {
                ranked.push_back(c);
            }
        }
        std::sort(ranked.begin(), ranked.end(), [&](uint32_t a, uint32_t b) {
            const float sa = scores[r * items + a], sb = scores[r * items + b];
            return sa != sb ? sa > sb : a < b;
        });
        for (size_t i = 0; i < std::min<size_t>(k, ranked.size()); ++i) {
            t.indices[r * k + i] = ranked[i];
            t.scores[r * k + i] = scores[r * items + ranked[i]];
        }
    }
    return t;
}

// The CPU backend's top_k op on the same dense scores and exclusions.
TopK backend_top_k(const std::vector<float>& scores, uint64_t rows, uint32_t items,
                   const Dataset& exclude, uint32_t k) {
    CpuBackend backend(2);
    CsrBatchView ex;
    ex.offsets = exclude.offsets.data();
    ex.indices = exclude.indices.data();
    ex.batch = BatchRows{nullptr, 0, rows};
    ex.cols = exclude.cols;
    TopK t;
    t.rows = rows;
    t.k = k;
    t.scores.resize(rows * k);
    t.indices.resize(rows * k);
    backend.top_k(ConstMatrixView(scores.data(), rows, items, items), &ex, k, t.scores.data(),
                  t.indices.data());
    return t;
}

TEST(Metrics, RandomScoresMatchAnIndependentComputation) {
    const uint64_t rows = 200;
    const uint32_t items = 300;
    std::mt19937_64 rng(20240607);
    std::vector<float> scores(rows * items);
    for (uint64_t r = 0; r < rows; ++r) {
        for (uint32_t c = 0; c < items; ++c) {
            // Every fourth row has scores on 8 levels only, so ties are common there.
            const double u = std::uniform_real_distribution<double>(0, 1)(rng);
            scores[r * items + c] = r % 4 == 0 ? float(int(u * 8)) / 8 : float(u);
        }
    }
    // Train items to exclude: power-law lengths, some rows excluding nearly everything (short
    // lists, unused slots). Held-out items: every third row empty.
    const Dataset train =
        testing::random_dataset(rows, items, testing::RowShape::kPowerLaw, false, 11, "train");
    const Dataset heldout =
        testing::random_dataset(rows, items, testing::RowShape::kEmptyRows, false, 12, "heldout");
    const std::vector<uint32_t> ks{1, 5, 20, 100, 300};
    const TopK mine = sorted_top_k(scores, rows, items, train, 300);
    const TopK cpu = backend_top_k(scores, rows, items, train, 300);
    ASSERT_EQ(cpu.indices, mine.indices);  // the backend's tie rule is the reference's
    bool saw_short_list = false;
    for (uint64_t r = 0; r < rows; ++r) saw_short_list |= mine.indices[r * 300 + 299] == kNone;
    EXPECT_TRUE(saw_short_list);
    for (const TopK* top : {&mine, &cpu}) {
        const RankingReport report = evaluate_ranking(*top, heldout, at(ks, items));
        for (uint32_t k : ks) {
            const Reference ref = reference_metrics(scores, rows, items, train, heldout, k);
            const MetricsAtK& m = report.at_k(k);
            const std::string where = (top == &mine ? "sorted K=" : "cpu K=") + std::to_string(k);
            EXPECT_EQ(report.users, ref.users) << where;
            EXPECT_NEAR(m.recall, ref.recall, 1e-6) << where;
            EXPECT_NEAR(m.nrecall, ref.nrecall, 1e-6) << where;
            EXPECT_NEAR(m.precision, ref.precision, 1e-6) << where;
            EXPECT_NEAR(m.ndcg, ref.ndcg, 1e-6) << where;
            EXPECT_NEAR(m.map, ref.map, 1e-6) << where;
            EXPECT_NEAR(m.hit_rate, ref.hit_rate, 1e-6) << where;
            EXPECT_NEAR(m.coverage, ref.coverage, 1e-6) << where;
            if (k == 20) {
                EXPECT_GT(ref.recall, 0.0);  // the comparison is not between zeros
                EXPECT_GT(ref.map, 0.0);
            }
        }
    }
    EXPECT_GT(evaluate_ranking(mine, heldout, at(ks, items)).users, 100u);
}

}  // namespace
}  // namespace sparsenet
