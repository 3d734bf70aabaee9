// Ranking metrics of top-K recommendation lists against held-out items, at several K at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/predictor.h"

namespace sparsenet {

// Definitions (docs/quality.md, "Metrics"). For a user u with held-out items H (|H| >= 1) and
// ranked list L (the first K filled slots of u's TopK row, in slot order), rel_i = 1 when the
// item at position i (1-based) is in H, hits = sum over i <= K of rel_i, m = min(K, |H|):
//   recall@K     hits / |H|
//   nrecall@K    hits / m  (normalised recall, Liang et al. 2018: 1 is reachable for every user)
//   precision@K  hits / K  (K, not the list's length: a short list is not rewarded)
//   ndcg@K       sum_i rel_i / log2(i + 1), divided by the ideal sum_{i=1..m} 1 / log2(i + 1)
//   map@K        mean of AP@K = (sum_i rel_i * hits@i / i) / m, hits@i the hits in the first i
//   hit_rate@K   fraction of users with hits >= 1
// All of these are averaged over the users (rows) with at least one held-out item; users whose
// list is empty or short count with the hits they have. Ties in score are not re-broken: the
// slot order of the TopK is the ranking.
//   coverage@K   |union of the top-K lists of those users| / items (the catalogue size)
struct MetricsAtK {
    uint32_t k = 0;
    double recall = 0.0;
    double nrecall = 0.0;
    double precision = 0.0;
    double ndcg = 0.0;
    double map = 0.0;
    double hit_rate = 0.0;
    double coverage = 0.0;
    uint64_t covered_items = 0;  // the numerator of coverage
};

// One user's numbers at one K (hit_rate is hits > 0, coverage has no per-user value).
struct UserMetricsAtK {
    uint32_t hits = 0;
    double recall = 0.0;
    double nrecall = 0.0;
    double precision = 0.0;
    double ndcg = 0.0;
    double ap = 0.0;
};

struct UserMetrics {
    uint64_t row = 0;
    uint64_t heldout = 0;            // |H|
    std::vector<UserMetricsAtK> at;  // same order as RankingReport::at
};

struct RankingOptions {
    std::vector<uint32_t> ks{20};  // cut-offs, each in 1 .. TopK::k; duplicates are an error
    // The catalogue size, the denominator of coverage (the output layer's width); 0: the
    // held-out dataset's width. Every listed item and every held-out column must be below it.
    uint32_t items = 0;
    bool per_user = false;  // fill RankingReport::per_user
};

struct RankingReport {
    uint64_t rows = 0;           // rows of the held-out dataset (examples, indexed ones expanded)
    uint64_t users = 0;          // rows with at least one held-out item: what the averages are over
    uint32_t items = 0;          // catalogue size used for coverage
    std::vector<MetricsAtK> at;  // one per RankingOptions::ks, in that order
    std::vector<UserMetrics> per_user;  // the `users` evaluated rows, ascending, when asked

    // The entry for cut-off k; Error(kUsage) when k was not computed.
    const MetricsAtK& at_k(uint32_t k) const;
};

// Scores `top` (rows aligned with `heldout`) at every K of options.ks. An indexed held-out
// dataset is expanded first. Errors: rows differ (kData), a K of 0 or above top.k or repeated
// (kUsage), an item listed twice in one row or not below the catalogue size (kData).
RankingReport evaluate_ranking(const TopK& top, const Dataset& heldout,
                               const RankingOptions& options);

// The value of metric `name` (recall, nrecall, precision, ndcg, map, hit_rate, coverage; case
// insensitive) in m; Error(kUsage) for another name.
double metric_value(const MetricsAtK& m, const std::string& name);

// The metric names metric_value accepts, in the order tables print them.
const std::vector<std::string>& metric_names();

}  // namespace sparsenet
