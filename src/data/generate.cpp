// Synthetic implicit-feedback data with planted structure (sparsenet generate).
//
// Model (docs/data-format.md, "Synthetic data"): items have Zipf popularity over a random
// permutation and one hashed topic each; users have 1-3 preferred topics and log-normal
// lengths scaled to the requested nnz; each interaction follows the user's topics with
// probability topic_focus, otherwise global popularity. Every random draw comes from a
// splitmix64 stream keyed by (seed, purpose, user or item), so the output does not depend on
// the thread count or on the standard library.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

// Purposes of the random streams; each (seed, purpose, id) triple is an independent stream.
enum Stream : uint64_t {
    kStreamLength = 1,
    kStreamItems = 2,
    kStreamHoldout = 3,
    kStreamPermutation = 4,
    kStreamTopic = 5,
};

constexpr double kLengthSigma = 1.2;  // log-normal shape of user lengths (ML-20M-like)
constexpr int kMaxAttempts = 32;      // rejection attempts before giving up on a source
constexpr double kTwoPi = 6.283185307179586476925286766559;

uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t stream_seed(uint64_t seed, uint64_t stream, uint64_t id) {
    return mix64(mix64(mix64(seed) ^ stream) ^ id);
}

// splitmix64 generator with our own (portable) uniform and normal draws.
class Rng {
  public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        state_ += 0x9e3779b97f4a7c15ULL;
        uint64_t z = state_;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    // Uniform in [0, 1).
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    // Uniform in [0, n), n < 2^32 (multiply-shift; bias below n / 2^32).
    uint32_t below(uint64_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }
    // Uniform in [0, n) for any n (Lemire's method with rejection).
    uint64_t below64(uint64_t n) {
        __uint128_t m = static_cast<__uint128_t>(next()) * n;
        uint64_t low = static_cast<uint64_t>(m);
        if (low < n) {
            const uint64_t threshold = (0 - n) % n;
            while (low < threshold) {
                m = static_cast<__uint128_t>(next()) * n;
                low = static_cast<uint64_t>(m);
            }
        }
        return static_cast<uint64_t>(m >> 64);
    }
    // Standard normal (Box-Muller, one value per call).
    double normal() {
        const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
    }

  private:
    uint64_t state_;
};

// Walker/Vose alias table over a list of items with weights: O(1) sampling.
class AliasTable {
  public:
    AliasTable() = default;
    AliasTable(const std::vector<uint32_t>& items, const std::vector<double>& weights) {
        const size_t n = items.size();
        items_ = items;
        alias_ = items;
        prob_.assign(n, 1.0);
        if (n == 0) return;
        double total = 0;
        for (double w : weights) total += w;
        std::vector<double> scaled(n);
        std::vector<uint32_t> small, large;
        for (size_t i = 0; i < n; ++i) {
            scaled[i] = weights[i] * static_cast<double>(n) / total;
            (scaled[i] < 1.0 ? small : large).push_back(static_cast<uint32_t>(i));
        }
        while (!small.empty() && !large.empty()) {
            const uint32_t s = small.back();
            small.pop_back();
            const uint32_t l = large.back();
            prob_[s] = scaled[s];
            alias_[s] = items_[l];
            scaled[l] = (scaled[l] + scaled[s]) - 1.0;
            if (scaled[l] < 1.0) {
                large.pop_back();
                small.push_back(l);
            }
        }
        // Leftovers (rounding) keep probability 1 of their own item.
    }
    bool empty() const { return items_.empty(); }
    size_t size() const { return items_.size(); }
    // One 64-bit draw: high half picks the slot, low half flips the coin.
    uint32_t sample(uint64_t x) const {
        const size_t i = static_cast<size_t>(((x >> 32) * items_.size()) >> 32);
        const double coin = static_cast<double>(x & 0xffffffffULL) * 0x1.0p-32;
        return coin < prob_[i] ? items_[i] : alias_[i];
    }

  private:
    std::vector<uint32_t> items_;
    std::vector<uint32_t> alias_;  // already mapped to item ids
    std::vector<double> prob_;
};

void check_options(const GenerateOptions& o) {
    auto fail = [](const std::string& what) {
        throw Error(ErrorCategory::kUsage, "generate: " + what);
    };
    if (o.items == 0) fail("items must be at least 1");
    if (o.factors == 0) fail("factors must be at least 1");
    if (!(o.popularity_exponent >= 0.0) || !std::isfinite(o.popularity_exponent)) {
        fail("popularity_exponent must be a finite value >= 0, got " +
             std::to_string(o.popularity_exponent));
    }
    if (!(o.topic_focus >= 0.0 && o.topic_focus <= 1.0)) {
        fail("topic_focus must be in [0, 1], got " + std::to_string(o.topic_focus));
    }
    if (!(o.holdout >= 0.0 && o.holdout < 1.0)) {
        fail("holdout must be in [0, 1), got " + std::to_string(o.holdout));
    }
}

// Number of held-out items for a user with `len` items.
uint64_t holdout_count(double holdout, uint64_t len) {
    if (holdout <= 0.0 || len < 2) return 0;
    const auto k = static_cast<uint64_t>(std::llround(holdout * static_cast<double>(len)));
    return std::clamp<uint64_t>(k, 1, len - 1);
}

// Below this many users (or items) the set-up loops stay serial: a few hundred thousand exp()
// calls cost less than the fork/join of a parallel region per bisection step (milliseconds each
// on a busy machine). Above it they dominate the set-up: at 1,000,000 users the 100 bisection
// steps are 100,000,000 exp() calls (0.6 s of a 2.9 s serial set-up at 10,000,000 items on this
// machine). Integer sums and per-element writes give the same result on any thread count.
constexpr int64_t kParallelSetup = int64_t(1) << 17;

// Per-user lengths: log-normal with mu chosen by bisection so the total is close to nnz,
// clipped to [lo, hi].
std::vector<uint64_t> user_lengths(const GenerateOptions& o, uint64_t lo, uint64_t hi) {
    const int64_t users = static_cast<int64_t>(o.users);
    const bool par = users >= kParallelSetup;
    std::vector<double> z(o.users);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t u = 0; u < users; ++u) {
        Rng rng(stream_seed(o.seed, kStreamLength, static_cast<uint64_t>(u)));
        z[u] = rng.normal();
    }
    auto length = [&](double mu, int64_t u) {
        const double x = std::exp(mu + kLengthSigma * z[u]);
        if (!(x < static_cast<double>(hi))) return hi;  // also catches inf
        return std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(x)), lo, hi);
    };
    auto total = [&](double mu) {
        uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum) if (par)
        for (int64_t u = 0; u < users; ++u) sum += length(mu, u);
        return sum;
    };
    double mu_lo = -40.0, mu_hi = 40.0;  // total(mu_lo) = users*lo, total(mu_hi) = users*hi
    for (int it = 0; it < 100 && mu_hi - mu_lo > 1e-12; ++it) {
        const double mid = 0.5 * (mu_lo + mu_hi);
        (total(mid) < o.nnz ? mu_lo : mu_hi) = mid;
    }
    const uint64_t below = total(mu_lo), above = total(mu_hi);
    double mu = mu_hi;
    if (below >= o.nnz) {
        mu = mu_lo;
    } else if (above > o.nnz && o.nnz - below <= above - o.nnz) {
        mu = mu_lo;
    }
    std::vector<uint64_t> lengths(o.users);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t u = 0; u < users; ++u) lengths[u] = length(mu, u);
    return lengths;
}

}  // namespace

std::vector<uint32_t> item_topics(const GenerateOptions& options) {
    check_options(options);
    std::vector<uint32_t> topics(options.items);
    const int64_t items = options.items;
#pragma omp parallel for schedule(static) if (items >= kParallelSetup)
    for (int64_t i = 0; i < items; ++i) {
        const uint64_t h = stream_seed(options.seed, kStreamTopic, i);
        topics[i] = static_cast<uint32_t>(((h >> 32) * options.factors) >> 32);
    }
    return topics;
}

GeneratedData generate(const GenerateOptions& options) {
    check_options(options);
    const GenerateOptions& o = options;
    const uint32_t items = o.items;
    const uint32_t factors = o.factors;

    // Item popularity: Zipf over a random permutation of the items.
    std::vector<uint32_t> order(items);
    for (uint32_t i = 0; i < items; ++i) order[i] = i;
    {
        Rng rng(stream_seed(o.seed, kStreamPermutation, 0));
        for (uint32_t i = items; i > 1; --i) std::swap(order[i - 1], order[rng.below64(i)]);
    }
    std::vector<double> weight(items);
    const bool par_items = int64_t(items) >= kParallelSetup;
#pragma omp parallel for schedule(static) if (par_items)
    for (int64_t rank = 0; rank < int64_t(items); ++rank) {
        weight[order[rank]] = std::pow(static_cast<double>(rank) + 1.0, -o.popularity_exponent);
    }
    std::vector<uint32_t> all_items(items);
    for (uint32_t i = 0; i < items; ++i) all_items[i] = i;
    const AliasTable global(all_items, weight);

    // Topics: one per item by hashing; an alias table per topic.
    const std::vector<uint32_t> topic_of = item_topics(o);
    std::vector<std::vector<uint32_t>> topic_items(factors);
    std::vector<std::vector<double>> topic_weights(factors);
    for (uint32_t i = 0; i < items; ++i) {
        topic_items[topic_of[i]].push_back(i);
        topic_weights[topic_of[i]].push_back(weight[i]);
    }
    std::vector<AliasTable> topic_tables(factors);
    std::vector<uint32_t> live_topics;
#pragma omp parallel for schedule(dynamic, 1) if (par_items)
    for (int64_t t = 0; t < int64_t(factors); ++t) {
        topic_tables[t] = AliasTable(topic_items[t], topic_weights[t]);
    }
    for (uint32_t t = 0; t < factors; ++t) {
        if (!topic_items[t].empty()) live_topics.push_back(t);
    }

    // Lengths, then offsets (the lengths are exact: sampling always fills a row).
    const uint64_t lo = std::min<uint64_t>(o.min_row, items);
    const uint64_t hi = std::max<uint64_t>(items / 2, lo);
    const std::vector<uint64_t> lengths = user_lengths(o, lo, hi);

    GeneratedData out;
    out.train.name = "train";
    out.heldout.name = "heldout";
    for (Dataset* d : {&out.train, &out.heldout}) {
        d->rows = o.users;
        d->cols = items;
        d->offsets.assign(o.users + 1, 0);
    }
    for (uint64_t u = 0; u < o.users; ++u) {
        const uint64_t k = holdout_count(o.holdout, lengths[u]);
        out.train.offsets[u + 1] = out.train.offsets[u] + (lengths[u] - k);
        out.heldout.offsets[u + 1] = out.heldout.offsets[u] + k;
    }
    out.train.indices.resize(out.train.offsets.back());
    out.heldout.indices.resize(out.heldout.offsets.back());

    const int64_t users = static_cast<int64_t>(o.users);
#pragma omp parallel
    {
        std::vector<uint8_t> seen(items, 0);
        std::vector<uint32_t> row;
        std::vector<uint32_t> user_topics;
        std::vector<uint8_t> topic_dead;
#pragma omp for schedule(dynamic, 64)
        for (int64_t su = 0; su < users; ++su) {
            const uint64_t u = static_cast<uint64_t>(su);
            const uint64_t len = lengths[u];
            Rng rng(stream_seed(o.seed, kStreamItems, u));

            // 1-3 distinct preferred topics among the non-empty ones.
            const size_t want = std::min<size_t>(1 + rng.below(3), live_topics.size());
            user_topics.clear();
            while (user_topics.size() < want) {
                const uint32_t t = live_topics[rng.below(live_topics.size())];
                if (std::find(user_topics.begin(), user_topics.end(), t) == user_topics.end()) {
                    user_topics.push_back(t);
                }
            }
            topic_dead.assign(user_topics.size(), 0);
            size_t live_user_topics = user_topics.size();
            bool global_dead = false;

            row.clear();
            while (row.size() < len) {
                uint32_t item = std::numeric_limits<uint32_t>::max();
                bool found = false;
                if (live_user_topics > 0 && rng.uniform() < o.topic_focus) {
                    // Pick one of the user's topics that still has unseen items.
                    size_t pick = rng.below(live_user_topics);
                    size_t slot = 0;
                    for (;; ++slot) {
                        if (!topic_dead[slot] && pick-- == 0) break;
                    }
                    const AliasTable& table = topic_tables[user_topics[slot]];
                    for (int a = 0; a < kMaxAttempts && !found; ++a) {
                        item = table.sample(rng.next());
                        found = !seen[item];
                    }
                    if (!found) {  // this topic is (nearly) exhausted for this user
                        topic_dead[slot] = 1;
                        --live_user_topics;
                    }
                }
                if (!found && !global_dead) {
                    for (int a = 0; a < kMaxAttempts && !found; ++a) {
                        item = global.sample(rng.next());
                        found = !seen[item];
                    }
                    if (!found) global_dead = true;
                }
                if (!found) {  // popular items exhausted: first unseen item from a random start
                    item = rng.below(items);
                    while (seen[item]) item = item + 1 == items ? 0 : item + 1;
                }
                seen[item] = 1;
                row.push_back(item);
            }
            for (uint32_t item : row) seen[item] = 0;

            // Hold out k items chosen by the user's holdout stream (partial Fisher-Yates).
            const uint64_t k = holdout_count(o.holdout, len);
            if (k > 0) {
                Rng hold(stream_seed(o.seed, kStreamHoldout, u));
                for (uint64_t j = 0; j < k; ++j) {
                    std::swap(row[j], row[j + hold.below64(len - j)]);
                }
            }
            uint32_t* held = out.heldout.indices.data() + out.heldout.offsets[u];
            uint32_t* train = out.train.indices.data() + out.train.offsets[u];
            std::copy(row.begin(), row.begin() + k, held);
            std::copy(row.begin() + k, row.end(), train);
            std::sort(held, held + k);
            std::sort(train, train + (len - k));
        }
    }
    return out;
}

}  // namespace sparsenet
