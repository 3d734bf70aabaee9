// The synthetic data generator: determinism, shape, popularity, planted topics, holdout.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

void expect_same(const Dataset& a, const Dataset& b) {
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.cols, b.cols);
    EXPECT_EQ(a.offsets, b.offsets);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.values, b.values);
}

// Restores the OpenMP thread count on scope exit.
class ThreadCount {
  public:
    explicit ThreadCount(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
    ~ThreadCount() { omp_set_num_threads(saved_); }

  private:
    int saved_;
};

TEST(Generate, SameSeedSameOutputDifferentSeedDifferentOutput) {
    GenerateOptions o;
    o.holdout = 0.2;
    const GeneratedData a = generate(o);
    const GeneratedData b = generate(o);
    expect_same(a.train, b.train);
    expect_same(a.heldout, b.heldout);

    o.seed = 2;
    const GeneratedData c = generate(o);
    EXPECT_NE(a.train.indices, c.train.indices);
    EXPECT_NE(a.train.offsets, c.train.offsets);
}

TEST(Generate, ThreadCountDoesNotChangeOutput) {
    GenerateOptions o;
    o.users = 3000;
    o.items = 800;
    o.nnz = 90000;
    o.holdout = 0.1;
    GeneratedData one, two;
    {
        ThreadCount t(1);
        one = generate(o);
    }
    {
        ThreadCount t(2);
        two = generate(o);
    }
    {
        ThreadCount t(3);  // more threads than cores, uneven chunks
        const GeneratedData three = generate(o);
        expect_same(one.train, three.train);
    }
    expect_same(one.train, two.train);
    expect_same(one.heldout, two.heldout);
}

TEST(Generate, ShapeNnzAndValidity) {
    for (const auto& [users, items, nnz] : std::vector<std::tuple<uint64_t, uint32_t, uint64_t>>{
             {2000, 1000, 60000}, {5000, 3000, 400000}, {300, 50000, 9000}, {1000, 100, 20000}}) {
        GenerateOptions o;
        o.users = users;
        o.items = items;
        o.nnz = nnz;
        const GeneratedData g = generate(o);
        const Dataset& d = g.train;
        SCOPED_TRACE(std::to_string(users) + "x" + std::to_string(items));
        EXPECT_EQ(d.name, "train");
        EXPECT_EQ(d.rows, users);
        EXPECT_EQ(d.cols, items);
        EXPECT_TRUE(d.is_boolean());
        EXPECT_NEAR(static_cast<double>(d.nnz()), static_cast<double>(nnz), 0.1 * nnz);
        d.validate("generate");  // sorted, no duplicates, in range
        uint64_t shortest = ~0ULL, longest = 0;
        for (uint64_t r = 0; r < d.rows; ++r) {
            shortest = std::min(shortest, d.row_length(r));
            longest = std::max(longest, d.row_length(r));
        }
        EXPECT_GE(shortest, o.min_row);
        EXPECT_LE(longest, items / 2);
        // No holdout: an all-empty held-out set of the same shape.
        EXPECT_EQ(g.heldout.name, "heldout");
        EXPECT_EQ(g.heldout.rows, users);
        EXPECT_EQ(g.heldout.cols, items);
        EXPECT_EQ(g.heldout.nnz(), 0u);
        g.heldout.validate("generate");
    }
}

TEST(Generate, UserLengthsAreHeavyTailed) {
    GenerateOptions o;
    o.users = 20000;
    o.items = 5000;
    o.nnz = 20000 * 50;
    const Dataset d = generate(o).train;
    std::vector<uint64_t> lengths(d.rows);
    for (uint64_t r = 0; r < d.rows; ++r) lengths[r] = d.row_length(r);
    std::sort(lengths.begin(), lengths.end());
    const double median = static_cast<double>(lengths[lengths.size() / 2]);
    const double mean = static_cast<double>(d.nnz()) / d.rows;
    EXPECT_GT(mean, 1.5 * median);
    EXPECT_GT(static_cast<double>(lengths.back()), 15 * median);
}

TEST(Generate, PopularityIsPowerLaw) {
    GenerateOptions o;
    o.users = 5000;
    o.items = 2000;
    o.nnz = 150000;
    const Dataset d = generate(o).train;
    std::vector<uint64_t> count(o.items, 0);
    for (uint32_t c : d.indices) ++count[c];
    std::sort(count.rbegin(), count.rend());
    uint64_t top = 0;
    for (uint32_t i = 0; i < o.items / 10; ++i) top += count[i];
    const double share = static_cast<double>(top) / d.nnz();
    EXPECT_GT(share, 0.35) << "top 10% of items hold " << share;

    // A flat exponent gives a flat popularity.
    o.popularity_exponent = 0.0;
    const Dataset flat = generate(o).train;
    std::fill(count.begin(), count.end(), 0);
    for (uint32_t c : flat.indices) ++count[c];
    std::sort(count.rbegin(), count.rend());
    top = 0;
    for (uint32_t i = 0; i < o.items / 10; ++i) top += count[i];
    EXPECT_LT(static_cast<double>(top) / flat.nnz(), 0.2);
}

// Co-occurrence lift of same-topic pairs over different-topic pairs within users' rows.
double topic_lift(const GenerateOptions& o) {
    const Dataset d = generate(o).train;
    const std::vector<uint32_t> topic = item_topics(o);
    std::vector<double> share(o.factors, 0.0);
    for (uint32_t c : d.indices) share[topic[c]] += 1.0 / d.nnz();
    double expected_same = 0;
    for (double p : share) expected_same += p * p;
    double same = 0, pairs = 0;
    std::vector<uint64_t> hist(o.factors);
    for (uint64_t r = 0; r < d.rows; ++r) {
        std::fill(hist.begin(), hist.end(), 0);
        for (uint64_t k = d.offsets[r]; k < d.offsets[r + 1]; ++k) ++hist[topic[d.indices[k]]];
        const double len = static_cast<double>(d.row_length(r));
        pairs += len * (len - 1) / 2;
        for (uint64_t h : hist) same += static_cast<double>(h) * (h - 1) / 2;
    }
    const double same_rate = same / pairs / expected_same;
    const double diff_rate = (pairs - same) / pairs / (1 - expected_same);
    return same_rate / diff_rate;
}

TEST(Generate, PlantedTopicsCoOccur) {
    GenerateOptions o;
    const std::vector<uint32_t> topic = item_topics(o);
    ASSERT_EQ(topic.size(), o.items);
    std::vector<uint32_t> size(o.factors, 0);
    for (uint32_t t : topic) {
        ASSERT_LT(t, o.factors);
        ++size[t];
    }
    for (uint32_t s : size) EXPECT_GT(s, 0u);

    const double lift = topic_lift(o);
    EXPECT_GT(lift, 2.0) << "same-topic co-occurrence lift " << lift;
    // Without topic focus there is no structure to find.
    o.topic_focus = 0.0;
    const double none = topic_lift(o);
    EXPECT_LT(none, 1.2) << "lift without focus " << none;
    EXPECT_GT(none, 0.8) << "lift without focus " << none;
}

TEST(Generate, HoldoutSplitIsDisjointAndCompletesTheData) {
    GenerateOptions o;
    o.users = 3000;
    const GeneratedData full = generate(o);
    o.holdout = 0.2;
    const GeneratedData split = generate(o);
    const Dataset& train = split.train;
    const Dataset& held = split.heldout;
    EXPECT_EQ(train.rows, full.train.rows);
    EXPECT_EQ(held.rows, full.train.rows);
    EXPECT_EQ(train.cols, full.train.cols);
    EXPECT_EQ(held.cols, full.train.cols);
    train.validate("train");
    held.validate("heldout");
    EXPECT_EQ(train.nnz() + held.nnz(), full.train.nnz());
    for (uint64_t r = 0; r < train.rows; ++r) {
        const uint64_t len = full.train.row_length(r);
        std::vector<uint32_t> a(train.indices.begin() + train.offsets[r],
                                train.indices.begin() + train.offsets[r + 1]);
        std::vector<uint32_t> b(held.indices.begin() + held.offsets[r],
                                held.indices.begin() + held.offsets[r + 1]);
        std::vector<uint32_t> both, merged;
        std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
        EXPECT_TRUE(both.empty()) << "row " << r;
        std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(merged));
        const std::vector<uint32_t> expected(
            full.train.indices.begin() + full.train.offsets[r],
            full.train.indices.begin() + full.train.offsets[r + 1]);
        ASSERT_EQ(merged, expected) << "row " << r;
        if (len >= 2) {
            EXPECT_GE(b.size(), 1u) << "row " << r;
            EXPECT_GE(a.size(), 1u) << "row " << r;
            // round(0.2 * len), at least 1, leaving at least 1 in train.
            const uint64_t k = std::lround(0.2 * static_cast<double>(len));
            EXPECT_EQ(b.size(), std::clamp<uint64_t>(k, 1, len - 1)) << "row " << r;
        }
    }
    const double fraction = static_cast<double>(held.nnz()) / full.train.nnz();
    EXPECT_NEAR(fraction, 0.2, 0.02);
}

TEST(Generate, SmallAndDegenerateShapes) {
    GenerateOptions o;
    o.users = 0;
    GeneratedData g = generate(o);
    EXPECT_EQ(g.train.rows, 0u);
    EXPECT_EQ(g.train.nnz(), 0u);
    g.train.validate("empty");

    o.users = 50;
    o.items = 1;
    o.factors = 4;
    g = generate(o);
    g.train.validate("one item");
    EXPECT_EQ(g.train.nnz(), 50u);  // every user gets the only item

    o.items = 3;
    o.nnz = 1000000;  // unreachable: rows are capped
    o.holdout = 0.5;
    g = generate(o);
    g.train.validate("three items");
    g.heldout.validate("three items");

    o.items = 100;
    o.nnz = 10;  // below users * min_row: min_row wins
    o.holdout = 0;
    g = generate(o);
    EXPECT_EQ(g.train.nnz(), 100u);
}

TEST(Generate, RejectsBadOptions) {
    auto expect_usage = [](GenerateOptions o) {
        try {
            generate(o);
            ADD_FAILURE() << "expected an error";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kUsage) << e.what();
        }
    };
    GenerateOptions o;
    o.items = 0;
    expect_usage(o);
    o = GenerateOptions();
    o.factors = 0;
    expect_usage(o);
    o = GenerateOptions();
    o.topic_focus = 1.5;
    expect_usage(o);
    o = GenerateOptions();
    o.holdout = 1.0;
    expect_usage(o);
    o = GenerateOptions();
    o.popularity_exponent = -1;
    expect_usage(o);
}

// The MovieLens-20M shape; run with --gtest_also_run_disabled_tests to time it.
TEST(Generate, DISABLED_Ml20mShapeTiming) {
    GenerateOptions o;
    o.users = 138493;
    o.items = 27278;
    o.nnz = 20000263;
    o.min_row = 20;
    o.holdout = 0.2;
    const auto t0 = std::chrono::steady_clock::now();
    const GeneratedData g = generate(o);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t longest = 0;
    for (uint64_t r = 0; r < g.train.rows; ++r) {
        longest = std::max(longest, g.train.row_length(r) + g.heldout.row_length(r));
    }
    std::printf(
        "ML-20M shape: %llu train + %llu held-out nnz, longest row %llu, %.2f s on %d "
        "threads\n",
        static_cast<unsigned long long>(g.train.nnz()),
        static_cast<unsigned long long>(g.heldout.nnz()), static_cast<unsigned long long>(longest),
        seconds, omp_get_max_threads());
    EXPECT_LT(seconds, 30.0);
    EXPECT_NEAR(static_cast<double>(g.train.nnz() + g.heldout.nnz()), 20000263.0, 2e6);
}

}  // namespace
}  // namespace sparsenet
