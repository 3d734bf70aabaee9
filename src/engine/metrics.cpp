// Ranking metrics of top-K lists against held-out items, and the popularity baseline.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sparsenet/error.h"
#include "sparsenet/predictor.h"

namespace sparsenet {

RankingMetrics ranking_metrics(const TopK& top, const Dataset& heldout, uint32_t k) {
    if (heldout.is_indexed()) return ranking_metrics(top, heldout.expanded(), k);
    if (heldout.rows != top.rows) {
        throw Error(ErrorCategory::kData,
                    "held-out dataset '" + heldout.name + "' has " + std::to_string(heldout.rows) +
                        " rows; the recommendations cover " + std::to_string(top.rows));
    }
    if (k == 0 || k > top.k) {
        throw Error(ErrorCategory::kUsage, "metrics at K = " + std::to_string(k) +
                                               " need top-K lists of at least K; have " +
                                               std::to_string(top.k));
    }
    RankingMetrics m;
    m.k = k;
    for (uint64_t r = 0; r < top.rows; ++r) {
        const uint64_t begin = heldout.offsets[r], end = heldout.offsets[r + 1];
        if (begin == end) continue;
        const uint32_t* first = heldout.indices.data() + begin;
        const uint32_t* last = heldout.indices.data() + end;
        double hits = 0.0, dcg = 0.0, idcg = 0.0;
        for (uint32_t i = 0; i < k; ++i) {
            const uint32_t item = top.indices[r * top.k + i];
            if (item == std::numeric_limits<uint32_t>::max()) break;
            if (std::binary_search(first, last, item)) {
                hits += 1.0;
                dcg += 1.0 / std::log2(double(i) + 2.0);
            }
        }
        const uint64_t relevant = end - begin;
        for (uint64_t i = 0; i < std::min<uint64_t>(relevant, k); ++i) {
            idcg += 1.0 / std::log2(double(i) + 2.0);
        }
        m.users++;
        m.recall += hits / double(relevant);
        m.precision += hits / double(k);
        m.ndcg += dcg / idcg;
    }
    if (m.users > 0) {
        m.recall /= double(m.users);
        m.precision /= double(m.users);
        m.ndcg /= double(m.users);
    }
    return m;
}

TopK popularity_top_k(const Dataset& train, uint32_t k) {
    if (train.is_indexed()) return popularity_top_k(train.expanded(), k);
    std::vector<uint64_t> counts(train.cols, 0);
    for (uint32_t c : train.indices) counts[c]++;
    std::vector<uint32_t> ranked(train.cols);
    std::iota(ranked.begin(), ranked.end(), 0u);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [&](uint32_t a, uint32_t b) { return counts[a] > counts[b]; });
    TopK top;
    top.rows = train.rows;
    top.k = k;
    top.scores.assign(train.rows * k, -std::numeric_limits<float>::infinity());
    top.indices.assign(train.rows * k, std::numeric_limits<uint32_t>::max());
    for (uint64_t r = 0; r < train.rows; ++r) {
        const uint32_t* first = train.indices.data() + train.offsets[r];
        const uint32_t* last = train.indices.data() + train.offsets[r + 1];
        uint32_t filled = 0;
        for (uint32_t item : ranked) {
            if (filled == k) break;
            if (std::binary_search(first, last, item)) continue;
            top.scores[r * k + filled] = static_cast<float>(counts[item]);
            top.indices[r * k + filled] = item;
            filled++;
        }
    }
    return top;
}

}  // namespace sparsenet
