// Evaluation splits: numpy's random stream (known answers printed by numpy 2.4), and the
// strong-generalization, random and carve splits checked against counts the test computes on
// its own from the raw interactions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "sparsenet/convert.h"
#include "sparsenet/error.h"
#include "sparsenet/split.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::TempDir;

// Known answers, from:
//   python3 -c "import numpy as np; np.random.seed(98765); print(np.random.permutation(10))"
// and likewise for the other lines (numpy 2.4.6, legacy RandomState stream).
TEST(NumpyLegacyRng, PermutationMatchesNumpy) {
    NumpyLegacyRng a(98765);
    EXPECT_EQ(a.permutation(10), (std::vector<uint64_t>{8, 7, 1, 2, 0, 6, 9, 4, 3, 5}));
    NumpyLegacyRng b(98765);
    const std::vector<uint64_t> p = b.permutation(1000);
    EXPECT_EQ(std::vector<uint64_t>(p.begin(), p.begin() + 8),
              (std::vector<uint64_t>{734, 219, 278, 498, 1, 979, 211, 933}));
    // np.random.seed(98765); np.random.choice(7, size=3, replace=False) == [2, 0, 6]:
    // choice without replacement is the head of a permutation.
    NumpyLegacyRng c(98765);
    const std::vector<uint64_t> q = c.permutation(7);
    EXPECT_EQ(std::vector<uint64_t>(q.begin(), q.begin() + 3), (std::vector<uint64_t>{2, 0, 6}));
}

TEST(NumpyLegacyRng, WideIntervalsMatchNumpy) {
    // np.random.seed(5); np.random.randint(0, 2**40 + 1, size=4, dtype=np.int64): numpy's
    // masked rejection on 64-bit draws, as random_interval for a range above 2^32.
    NumpyLegacyRng r(5);
    const uint64_t max = uint64_t{1} << 40;
    EXPECT_EQ(r.interval(max), 34745516772ULL);
    EXPECT_EQ(r.interval(max), 993841416126ULL);
    EXPECT_EQ(r.interval(max), 680694927056ULL);
    EXPECT_EQ(r.interval(max), 34320314572ULL);
    EXPECT_EQ(r.interval(0), 0u);
}

struct Rating {
    int user, item;
    double rating;
};

// Ratings with varied user activity, in a random (file) order.
std::vector<Rating> make_ratings(uint32_t seed) {
    std::mt19937 rng(seed);
    std::set<std::pair<int, int>> seen;
    std::vector<Rating> out;
    for (int u = 1; u <= 400; ++u) {
        const int n = 1 + int(rng() % 40);
        for (int k = 0; k < n; ++k) {
            const int item = 1 + int(rng() % 300) * int(1 + rng() % 3);  // skewed popularity
            if (!seen.insert({u, item}).second) continue;
            out.push_back({u, item, 0.5 * (1 + rng() % 10)});
        }
    }
    std::shuffle(out.begin(), out.end(), rng);
    return out;
}

std::string to_csv(const std::vector<Rating>& ratings) {
    std::ostringstream s;
    s << "userId,movieId,rating,timestamp\n";
    for (const Rating& r : ratings) s << r.user << ',' << r.item << ',' << r.rating << ",0\n";
    return s.str();
}

std::set<std::string> labels(const LabelIndex& index) {
    std::set<std::string> out;
    for (uint32_t i = 0; i < index.size(); ++i) out.insert(index.label(i));
    return out;
}

// (user label, item label) pairs of a dataset.
std::set<std::pair<std::string, std::string>> pairs(const Dataset& d, const LabelIndex& users,
                                                    const LabelIndex& items) {
    std::set<std::pair<std::string, std::string>> out;
    for (uint64_t r = 0; r < d.rows; ++r) {
        for (uint64_t k = d.offsets[r]; k < d.offsets[r + 1]; ++k) {
            out.insert({users.label(uint32_t(r)), items.label(d.indices[k])});
        }
    }
    return out;
}

TEST(StrongSplit, ReproducesIndependentlyComputedCounts) {
    const std::vector<Rating> ratings = make_ratings(3);
    TempDir dir;
    testing::write_file(dir.file("ratings.csv"), to_csv(ratings));
    ConvertOptions o;
    o.min_rating = 4.0;
    LabelIndex users, items;
    const Interactions in = read_interactions({dir.file("ratings.csv")}, o, users, items);
    StrongSplitOptions s;
    s.heldout_users = 60;
    const StrongSplit split = strong_generalization_split(in, users, items, s);

    // Independent computation from the raw ratings.
    std::map<std::string, std::vector<std::string>> liked;  // user -> items in file order
    for (const Rating& r : ratings) {
        if (r.rating >= 4.0) liked[std::to_string(r.user)].push_back(std::to_string(r.item));
    }
    std::set<std::string> kept;
    for (const auto& [u, its] : liked) {
        if (its.size() >= 5) kept.insert(u);
    }
    ASSERT_GT(kept.size(), 2 * s.heldout_users);
    EXPECT_EQ(split.users_kept, kept.size());
    EXPECT_EQ(split.validation_users.size(), s.heldout_users);
    EXPECT_EQ(split.test_users.size(), s.heldout_users);
    EXPECT_EQ(split.train_users.size(), kept.size() - 2 * s.heldout_users);
    // The three user sets partition the kept users.
    std::set<std::string> all = labels(split.train_users);
    for (const LabelIndex* idx : {&split.validation_users, &split.test_users}) {
        for (const std::string& u : labels(*idx)) EXPECT_TRUE(all.insert(u).second) << u;
    }
    EXPECT_EQ(all, kept);

    // Items: exactly those of training users, numbered by first appearance in the file.
    const std::set<std::string> train_users = labels(split.train_users);
    std::vector<std::string> first_seen;
    std::set<std::string> item_set;
    for (const Rating& r : ratings) {
        const std::string u = std::to_string(r.user), i = std::to_string(r.item);
        if (r.rating >= 4.0 && train_users.count(u) && item_set.insert(i).second) {
            first_seen.push_back(i);
        }
    }
    ASSERT_EQ(split.items.size(), first_seen.size());
    for (size_t k = 0; k < first_seen.size(); ++k)
        EXPECT_EQ(split.items.label(uint32_t(k)), first_seen[k]);

    // Train holds every liked item of every train user.
    uint64_t train_nnz = 0;
    for (const std::string& u : train_users) train_nnz += liked[u].size();
    EXPECT_EQ(split.train.nnz(), train_nnz);
    EXPECT_EQ(split.train.cols, first_seen.size());

    // Held-out users: their liked items restricted to train items split into
    // floor(0.2 n) held out and the rest folded in (n >= 5), or all folded in.
    auto check = [&](const LabelIndex& group, const Dataset& fold_in, const Dataset& heldout) {
        const auto tr = pairs(fold_in, group, split.items);
        const auto te = pairs(heldout, group, split.items);
        for (uint32_t r = 0; r < group.size(); ++r) {
            const std::string u = group.label(r);
            std::set<std::string> known;
            for (const std::string& i : liked[u]) {
                if (item_set.count(i)) known.insert(i);
            }
            const uint64_t n = known.size();
            const uint64_t expect_te = n >= 5 ? uint64_t(0.2 * double(n)) : 0;
            EXPECT_EQ(heldout.row_length(r), expect_te) << u;
            EXPECT_EQ(fold_in.row_length(r), n - expect_te) << u;
            for (const std::string& i : known) {
                EXPECT_NE(tr.count({u, i}) + te.count({u, i}), 0u) << u << " " << i;
                EXPECT_FALSE(tr.count({u, i}) && te.count({u, i})) << u << " " << i;
            }
        }
    };
    check(split.validation_users, split.validation_fold_in, split.validation_heldout);
    check(split.test_users, split.test_fold_in, split.test_heldout);

    // Deterministic; another seed gives another split.
    const StrongSplit again = strong_generalization_split(in, users, items, s);
    EXPECT_EQ(labels(again.test_users), labels(split.test_users));
    s.seed = 1;
    const StrongSplit other = strong_generalization_split(in, users, items, s);
    EXPECT_NE(labels(other.test_users), labels(split.test_users));
}

TEST(StrongSplit, TooFewUsersIsAnError) {
    Interactions in;
    LabelIndex users, items;
    for (int u = 0; u < 4; ++u) {
        users.insert(std::to_string(u));
        for (int i = 0; i < 6; ++i) {
            in.sample.push_back(u);
            in.feature.push_back(items.insert(std::to_string(i)));
        }
    }
    StrongSplitOptions s;
    s.heldout_users = 2;
    EXPECT_THROW(strong_generalization_split(in, users, items, s), Error);
}

TEST(RandomSplit, ExactFractionDisjointAndComplete) {
    Interactions in;
    std::mt19937 rng(2);
    std::set<std::pair<uint32_t, uint32_t>> truth;
    while (truth.size() < 5003) truth.insert({rng() % 300, rng() % 200});
    for (const auto& [u, i] : truth) {
        in.sample.push_back(u);
        in.feature.push_back(i);
    }
    const auto [train, test] = random_split(in, 300, 200, 0.2, 7);
    EXPECT_EQ(test.nnz(), 1000u);  // floor(0.2 * 5003)
    EXPECT_EQ(train.nnz() + test.nnz(), truth.size());
    std::set<std::pair<uint32_t, uint32_t>> seen;
    for (const Dataset* d : {&train, &test}) {
        for (uint64_t r = 0; r < d->rows; ++r) {
            for (uint64_t k = d->offsets[r]; k < d->offsets[r + 1]; ++k) {
                EXPECT_TRUE(seen.insert({uint32_t(r), d->indices[k]}).second);
            }
        }
    }
    EXPECT_EQ(seen, truth);
    const auto [train2, test2] = random_split(in, 300, 200, 0.2, 7);
    EXPECT_EQ(test2.indices, test.indices);
    const auto [train3, test3] = random_split(in, 300, 200, 0.2, 8);
    EXPECT_NE(test3.indices, test.indices);
}

TEST(CarveRows, MovesRoundedFractionOfEveryRow) {
    const Dataset d = testing::random_dataset(200, 150, testing::RowShape::kPowerLaw, true, 4);
    const auto [kept, carved] = carve_rows(d, 0.1, 3);
    for (uint64_t r = 0; r < d.rows; ++r) {
        const uint64_t n = d.row_length(r);
        const uint64_t take = uint64_t(std::llround(0.1 * double(n)));
        EXPECT_EQ(carved.row_length(r), take);
        EXPECT_EQ(kept.row_length(r), n - take);
        std::map<uint32_t, float> merged;
        for (const Dataset* p : {&kept, &carved}) {
            for (uint64_t k = p->offsets[r]; k < p->offsets[r + 1]; ++k) {
                EXPECT_TRUE(merged.emplace(p->indices[k], p->values[k]).second);
            }
        }
        std::map<uint32_t, float> original;
        for (uint64_t k = d.offsets[r]; k < d.offsets[r + 1]; ++k) {
            original[d.indices[k]] = d.values[k];
        }
        EXPECT_EQ(merged, original);
    }
}

// Rows listed in an order of their own, interleaved (as a log of several users is): row r's j-th
// listed item is 2000 - (100 * r + (7 * j) % 13 + 13 * j): a row lists its items in descending
// order, so the CSR order (ascending) is not the listed one.
Interactions interleaved_rows(const std::vector<uint32_t>& lengths) {
    Interactions in;
    std::vector<uint32_t> listed(lengths.size(), 0);
    for (bool more = true; more;) {
        more = false;
        for (uint32_t r = 0; r < lengths.size(); ++r) {
            if (listed[r] == lengths[r]) continue;
            const uint32_t j = listed[r]++;
            in.sample.push_back(r);
            in.feature.push_back(2000 - (100 * r + (7 * j) % 13 + 13 * j));
            more = true;
        }
    }
    return in;
}

TEST(CarveLast, MovesTheLastListedItemsOfEveryRow) {
    const std::vector<uint32_t> lengths{0, 1, 5, 10, 15, 25, 36};
    const Interactions in = interleaved_rows(lengths);
    const auto [kept, carved] = carve_last(in, lengths.size() + 1, 0.1);
    // What each row listed, in order, computed apart from the function.
    std::vector<std::vector<uint32_t>> listed(lengths.size());
    for (size_t k = 0; k < in.sample.size(); ++k) listed[in.sample[k]].push_back(in.feature[k]);
    std::vector<std::vector<uint32_t>> got_kept(lengths.size()), got_carved(lengths.size());
    for (size_t k = 0; k < kept.sample.size(); ++k)
        got_kept[kept.sample[k]].push_back(kept.feature[k]);
    for (size_t k = 0; k < carved.sample.size(); ++k) {
        got_carved[carved.sample[k]].push_back(carved.feature[k]);
    }
    for (size_t r = 0; r < lengths.size(); ++r) {
        // round(0.1 n) away from zero: 15 -> 2, 25 -> 3 (numpy's round would give 2)
        const size_t take = size_t(std::llround(0.1 * lengths[r]));
        const std::vector<uint32_t>& all = listed[r];
        EXPECT_EQ(got_carved[r], std::vector<uint32_t>(all.end() - take, all.end())) << r;
        EXPECT_EQ(got_kept[r], std::vector<uint32_t>(all.begin(), all.end() - take)) << r;
    }
    EXPECT_EQ(got_carved[5].size(), 3u);
    EXPECT_EQ(kept.sample.size() + carved.sample.size(), in.sample.size());
    EXPECT_THROW(carve_last(in, lengths.size(), 0.0), Error);
    EXPECT_THROW(carve_last(in, lengths.size(), 1.0), Error);
    EXPECT_THROW(carve_last(in, 3, 0.1), Error);  // a row outside `rows`
}

TEST(RecencyWeighted, WeighsByTheNumberOfItemsListedAfter) {
    const std::vector<uint32_t> lengths{4, 1, 0, 3};
    const Interactions in = interleaved_rows(lengths);
    const double tau = 2.5;
    const Interactions w = recency_weighted(in, lengths.size(), tau);
    ASSERT_EQ(w.value.size(), in.sample.size());
    EXPECT_EQ(w.sample, in.sample);
    EXPECT_EQ(w.feature, in.feature);
    std::vector<uint32_t> seen(lengths.size(), 0);
    for (size_t k = 0; k < in.sample.size(); ++k) {
        const uint32_t r = in.sample[k];
        const double age = double(lengths[r] - 1 - seen[r]++);
        EXPECT_FLOAT_EQ(w.value[k], float(std::exp(-age / tau))) << k;
    }
    // The last listed item of a row weighs 1; a row of one item too.
    EXPECT_FLOAT_EQ(w.value[1], 1.0f);  // row 1's only item, the second interaction listed
    // As a dataset: the weights follow their items into CSR order.
    const Dataset d = to_dataset(w, "w", lengths.size(), 2001);
    ASSERT_FALSE(d.is_boolean());
    for (uint64_t k = d.offsets[0]; k < d.offsets[1]; ++k) {
        const uint32_t item = d.indices[k];  // row 0's j-th listed item is 2000 - (7j % 13 + 13j)
        int j = -1;
        for (int c = 0; c < 4; ++c) {
            if (2000 - ((7 * c) % 13 + 13 * c) == int(item)) j = c;
        }
        ASSERT_GE(j, 0);
        EXPECT_FLOAT_EQ(d.values[k], float(std::exp(-(3.0 - j) / tau)));
    }
    EXPECT_THROW(recency_weighted(in, lengths.size(), 0.0), Error);
    EXPECT_THROW(recency_weighted(in, lengths.size(), -1.0), Error);
    EXPECT_THROW(recency_weighted(in, lengths.size(), std::nan("")), Error);
}

TEST(ToDataset, RepeatedPairIsAnError) {
    Interactions in{{0, 1, 0}, {2, 2, 2}, {}};
    EXPECT_THROW(to_dataset(in, "d", 2, 3), Error);
    Interactions ok{{1, 0}, {2, 1}, {}};
    const Dataset d = to_dataset(ok, "d", 2, 3);
    EXPECT_EQ(d.offsets, (std::vector<uint64_t>{0, 1, 2}));
    EXPECT_EQ(d.indices, (std::vector<uint32_t>{1, 2}));
}

}  // namespace
}  // namespace sparsenet
