// Ranking metrics of top-K lists against held-out items (several K in one pass over the lists),
// and the popularity baseline.
#include "sparsenet/metrics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

#include "sparsenet/error.h"
#include "sparsenet/predictor.h"

namespace sparsenet {

namespace {
constexpr uint32_t kUnused = std::numeric_limits<uint32_t>::max();
}  // namespace

const MetricsAtK& RankingReport::at_k(uint32_t k) const {
    for (const MetricsAtK& m : at) {
        if (m.k == k) return m;
    }
    throw Error(ErrorCategory::kUsage, "metrics at K = " + std::to_string(k) +
                                           " were not computed; expected one of the cut-offs "
                                           "asked for");
}

const std::vector<std::string>& metric_names() {
    static const std::vector<std::string> names{"recall", "nrecall",  "precision", "ndcg",
                                                "map",    "hit_rate", "coverage"};
    return names;
}

double metric_value(const MetricsAtK& m, const std::string& name) {
    std::string n = name;
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == "recall") return m.recall;
    if (n == "nrecall") return m.nrecall;
    if (n == "precision") return m.precision;
    if (n == "ndcg") return m.ndcg;
    if (n == "map") return m.map;
    if (n == "hit_rate") return m.hit_rate;
    if (n == "coverage") return m.coverage;
    std::string known;
    for (const std::string& k : metric_names()) known += (known.empty() ? "" : ", ") + k;
    throw Error(ErrorCategory::kUsage, "unknown metric '" + name + "'; expected one of " + known);
}

RankingReport evaluate_ranking(const TopK& top, const Dataset& heldout,
                               const RankingOptions& options) {
    if (heldout.is_indexed()) return evaluate_ranking(top, heldout.expanded(), options);
    if (heldout.rows != top.rows) {
        throw Error(ErrorCategory::kData,
                    "held-out dataset '" + heldout.name + "' has " + std::to_string(heldout.rows) +
                        " rows; the recommendations cover " + std::to_string(top.rows));
    }
    if (top.indices.size() != top.rows * top.k || top.scores.size() != top.rows * top.k) {
        throw Error(ErrorCategory::kUsage, "a TopK of " + std::to_string(top.rows) + " rows x " +
                                               std::to_string(top.k) +
                                               " slots needs that many scores and indices");
    }
    if (options.ks.empty()) throw Error(ErrorCategory::kUsage, "metrics need at least one K");
    uint32_t kmax = 0;
    for (size_t i = 0; i < options.ks.size(); ++i) {
        const uint32_t k = options.ks[i];
        if (k == 0 || k > top.k) {
            throw Error(ErrorCategory::kUsage, "metrics at K = " + std::to_string(k) +
                                                   " need top-K lists of at least K; have " +
                                                   std::to_string(top.k));
        }
        if (std::find(options.ks.begin(), options.ks.begin() + i, k) != options.ks.begin() + i) {
            throw Error(ErrorCategory::kUsage, "K = " + std::to_string(k) + " is listed twice");
        }
        kmax = std::max(kmax, k);
    }
    const uint32_t items = options.items != 0 ? options.items : heldout.cols;
    if (heldout.cols > items) {
        throw Error(ErrorCategory::kData,
                    "held-out dataset '" + heldout.name + "' has " + std::to_string(heldout.cols) +
                        " columns; the catalogue has " + std::to_string(items) + " items");
    }

    RankingReport report;
    report.rows = heldout.rows;
    report.items = items;
    report.at.resize(options.ks.size());
    for (size_t j = 0; j < options.ks.size(); ++j) report.at[j].k = options.ks[j];

    // ideal[m] = sum_{i=1..m} 1 / log2(i + 1); gain[i] = 1 / log2(i + 2) for slot i (0-based).
    std::vector<double> gain(kmax), ideal(kmax + 1, 0.0);
    for (uint32_t i = 0; i < kmax; ++i) {
        gain[i] = 1.0 / std::log2(double(i) + 2.0);
        ideal[i + 1] = ideal[i] + gain[i];
    }
    // Coverage at every K from one pass: the best (lowest) slot at which each item appears in
    // any evaluated list; an item is covered at K when that slot is < K.
    std::vector<uint32_t> best_slot(items, kUnused);
    std::vector<uint64_t> seen(items, 0);  // row + 1 of the last row listing the item
    // Per slot of the current row: hits, DCG and the AP numerator up to and including it.
    std::vector<uint32_t> hits_to(kmax);
    std::vector<double> dcg_to(kmax), ap_to(kmax);
    for (uint64_t r = 0; r < top.rows; ++r) {
        const uint32_t* row = top.indices.data() + r * top.k;
        const uint32_t* first = heldout.indices.data() + heldout.offsets[r];
        const uint32_t* last = heldout.indices.data() + heldout.offsets[r + 1];
        const bool evaluated = first != last;
        uint32_t filled = 0, hits = 0;
        double dcg = 0.0, ap = 0.0;
        // The whole row is checked, not only the first kmax slots: a TopK with a repeated item
        // is broken whatever K is asked.
        for (uint32_t i = 0; i < top.k && row[i] != kUnused; ++i) {
            const uint32_t item = row[i];
            if (item >= items) {
                throw Error(ErrorCategory::kData,
                            "row " + std::to_string(r) + " slot " + std::to_string(i) +
                                " lists item " + std::to_string(item) +
                                "; expected an item below the catalogue size " +
                                std::to_string(items));
            }
            if (seen[item] == r + 1) {
                throw Error(ErrorCategory::kData, "row " + std::to_string(r) + " lists item " +
                                                      std::to_string(item) +
                                                      " twice; expected distinct items");
            }
            seen[item] = r + 1;
            if (i >= kmax || !evaluated) continue;
            filled = i + 1;
            best_slot[item] = std::min(best_slot[item], i);
            if (std::binary_search(first, last, item)) {
                hits++;
                dcg += gain[i];
                ap += double(hits) / double(i + 1);
            }
            hits_to[i] = hits;
            dcg_to[i] = dcg;
            ap_to[i] = ap;
        }
        if (!evaluated) continue;
        report.users++;
        const uint64_t relevant = last - first;
        UserMetrics user;
        if (options.per_user) {
            user.row = r;
            user.heldout = relevant;
            user.at.resize(options.ks.size());
        }
        for (size_t j = 0; j < options.ks.size(); ++j) {
            const uint32_t k = options.ks[j];
            const uint32_t n = std::min(k, filled);  // list slots inside the cut-off
            const uint32_t h = n > 0 ? hits_to[n - 1] : 0;
            const double d = n > 0 ? dcg_to[n - 1] : 0.0;
            const double a = n > 0 ? ap_to[n - 1] : 0.0;
            const double m = double(std::min<uint64_t>(k, relevant));
            UserMetricsAtK u;
            u.hits = h;
            u.recall = double(h) / double(relevant);
            u.nrecall = double(h) / m;
            u.precision = double(h) / double(k);
            u.ndcg = d / ideal[std::min<uint64_t>(k, relevant)];
            u.ap = a / m;
            MetricsAtK& acc = report.at[j];
            acc.recall += u.recall;
            acc.nrecall += u.nrecall;
            acc.precision += u.precision;
            acc.ndcg += u.ndcg;
            acc.map += u.ap;
            acc.hit_rate += h > 0 ? 1.0 : 0.0;
            if (options.per_user) user.at[j] = u;
        }
        if (options.per_user) report.per_user.push_back(std::move(user));
    }
    for (MetricsAtK& m : report.at) {
        if (report.users > 0) {
            const double n = double(report.users);
            m.recall /= n;
            m.nrecall /= n;
            m.precision /= n;
            m.ndcg /= n;
            m.map /= n;
            m.hit_rate /= n;
        }
        m.covered_items = static_cast<uint64_t>(
            std::count_if(best_slot.begin(), best_slot.end(), [&](uint32_t s) { return s < m.k; }));
        m.coverage = items > 0 ? double(m.covered_items) / double(items) : 0.0;
    }
    return report;
}

RankingMetrics ranking_metrics(const TopK& top, const Dataset& heldout, uint32_t k) {
    RankingOptions options;
    options.ks = {k};
    // This single-K form reports no coverage, so the catalogue only has to hold every item.
    options.items = heldout.cols;
    for (uint32_t item : top.indices) {
        if (item != kUnused) options.items = std::max(options.items, item + 1);
    }
    const RankingReport report = evaluate_ranking(top, heldout, options);
    RankingMetrics m;
    m.k = k;
    m.users = report.users;
    m.recall = report.at[0].recall;
    m.precision = report.at[0].precision;
    m.ndcg = report.at[0].ndcg;
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
    top.indices.assign(train.rows * k, kUnused);
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
