// Evaluation splits. Protocol B follows dawenl/vae_cf's notebook step by step (reference:
// ../shared/reference/anchors.md section 1.2), including numpy's legacy random stream.
#include "sparsenet/split.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "sparsenet/error.h"

namespace sparsenet {

uint64_t NumpyLegacyRng::interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
    uint64_t value;
    if (max <= 0xffffffffULL) {
        while ((value = (static_cast<uint64_t>(mt_()) & mask)) > max) {
        }
    } else {
        do {
            const uint64_t hi = mt_();
            value = ((hi << 32) | mt_()) & mask;
        } while (value > max);
    }
    return value;
}

std::vector<uint64_t> NumpyLegacyRng::permutation(uint64_t n) {
    std::vector<uint64_t> p(n);
    std::iota(p.begin(), p.end(), uint64_t{0});
    for (uint64_t i = n; i-- > 1;) std::swap(p[i], p[interval(i)]);  // numpy's _shuffle_raw
    return p;
}

namespace {

// Label order of pandas' groupby on an integer id column: numeric when every label is an
// integer, lexicographic otherwise.
std::vector<uint32_t> sorted_by_label(std::vector<uint32_t> ids, const LabelIndex& index) {
    bool numeric = true;
    std::vector<int64_t> value(index.size(), 0);
    for (uint32_t id : ids) {
        const std::string& s = index.label(id);
        int64_t v = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || ptr != s.data() + s.size()) {
            numeric = false;
            break;
        }
        value[id] = v;
    }
    if (numeric) {
        std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
            return value[a] != value[b] ? value[a] < value[b] : a < b;
        });
    } else {
        std::sort(ids.begin(), ids.end(),
                  [&](uint32_t a, uint32_t b) { return index.label(a) < index.label(b); });
    }
    return ids;
}

LabelIndex labels_of(const std::vector<uint32_t>& ids, const LabelIndex& index) {
    LabelIndex out;
    for (uint32_t id : ids) out.insert(index.label(id));
    return out;
}

enum Role : uint8_t { kDropped, kTrain, kValidation, kTest };

}  // namespace

StrongSplit strong_generalization_split(const Interactions& in, const LabelIndex& users,
                                        const LabelIndex& items,
                                        const StrongSplitOptions& options) {
    if (!(options.heldout_fraction > 0.0 && options.heldout_fraction < 1.0)) {
        throw Error(ErrorCategory::kUsage, "held-out fraction must be in (0, 1)");
    }
    const size_t nnz = in.sample.size();
    std::vector<uint64_t> count(users.size(), 0);
    for (uint32_t u : in.sample) ++count[u];
    std::vector<uint32_t> kept;
    for (uint32_t u = 0; u < users.size(); ++u) {
        if (count[u] >= options.min_items) kept.push_back(u);
    }
    StrongSplit out;
    out.users_kept = kept.size();
    if (kept.size() <= 2 * options.heldout_users) {
        throw Error(ErrorCategory::kData,
                    std::to_string(kept.size()) + " users have at least " +
                        std::to_string(options.min_items) + " interactions; " +
                        std::to_string(options.heldout_users) +
                        " validation and as many test users need more (lower --heldout-users)");
    }
    // unique_uid ascending, then permuted.
    kept = sorted_by_label(std::move(kept), users);
    NumpyLegacyRng rng(options.seed);
    const std::vector<uint64_t> perm = rng.permutation(kept.size());
    const uint64_t n_train = kept.size() - 2 * options.heldout_users;
    std::vector<Role> role(users.size(), kDropped);
    std::vector<uint32_t> row(users.size(), 0);  // row within its role's datasets
    std::vector<uint32_t> train_ids, validation_ids, test_ids;
    for (uint64_t i = 0; i < kept.size(); ++i) {
        const uint32_t u = kept[perm[i]];
        std::vector<uint32_t>& group =
            i < n_train ? train_ids
                        : (i < n_train + options.heldout_users ? validation_ids : test_ids);
        role[u] =
            i < n_train ? kTrain : (i < n_train + options.heldout_users ? kValidation : kTest);
        row[u] = static_cast<uint32_t>(group.size());
        group.push_back(u);
    }
    out.train_users = labels_of(train_ids, users);
    out.validation_users = labels_of(validation_ids, users);
    out.test_users = labels_of(test_ids, users);

    // Items: those of training users, in order of first appearance in the file.
    std::vector<uint32_t> column(items.size(), UINT32_MAX);
    Interactions train;
    for (size_t k = 0; k < nnz; ++k) {
        if (role[in.sample[k]] != kTrain) continue;
        uint32_t& c = column[in.feature[k]];
        if (c == UINT32_MAX) {
            c = static_cast<uint32_t>(out.items.size());
            out.items.insert(items.label(in.feature[k]));
        }
        train.sample.push_back(row[in.sample[k]]);
        train.feature.push_back(c);
    }
    const uint32_t cols = static_cast<uint32_t>(out.items.size());
    out.train = to_dataset(train, "train", n_train, cols);

    // Fold-in / held-out, per split: users in ascending id order, their rows in file order.
    std::vector<std::vector<size_t>> rows_of(users.size());
    for (size_t k = 0; k < nnz; ++k) {
        const Role r = role[in.sample[k]];
        if ((r == kValidation || r == kTest) && column[in.feature[k]] != UINT32_MAX) {
            rows_of[in.sample[k]].push_back(k);
        }
    }
    auto split_users = [&](const std::vector<uint32_t>& ids, Dataset& fold_in, Dataset& heldout) {
        NumpyLegacyRng split_rng(options.seed);  // vae_cf re-seeds for every split
        Interactions tr, te;
        for (uint32_t u : sorted_by_label(ids, users)) {
            const std::vector<size_t>& rows = rows_of[u];
            const uint64_t n = rows.size();
            std::vector<bool> held(n, false);
            if (n >= options.min_items) {
                const auto take = static_cast<uint64_t>(options.heldout_fraction * double(n));
                const std::vector<uint64_t> p = split_rng.permutation(n);
                for (uint64_t i = 0; i < take; ++i) held[p[i]] = true;
            }
            for (uint64_t i = 0; i < n; ++i) {
                Interactions& dst = held[i] ? te : tr;
                dst.sample.push_back(row[u]);
                dst.feature.push_back(column[in.feature[rows[i]]]);
            }
        }
        fold_in = to_dataset(tr, "fold_in", ids.size(), cols);
        heldout = to_dataset(te, "heldout", ids.size(), cols);
    };
    split_users(validation_ids, out.validation_fold_in, out.validation_heldout);
    split_users(test_ids, out.test_fold_in, out.test_heldout);
    return out;
}

std::pair<Dataset, Dataset> random_split(const Interactions& in, uint64_t rows, uint32_t cols,
                                         double test_fraction, uint32_t seed) {
    if (!(test_fraction > 0.0 && test_fraction < 1.0)) {
        throw Error(ErrorCategory::kUsage, "test fraction must be in (0, 1)");
    }
    const uint64_t nnz = in.sample.size();
    const auto n_test = static_cast<uint64_t>(test_fraction * double(nnz));
    NumpyLegacyRng rng(seed);
    const std::vector<uint64_t> perm = rng.permutation(nnz);
    std::vector<bool> is_test(nnz, false);
    for (uint64_t i = 0; i < n_test; ++i) is_test[perm[i]] = true;
    Interactions train, test;
    const bool analog = !in.value.empty();
    for (uint64_t k = 0; k < nnz; ++k) {
        Interactions& dst = is_test[k] ? test : train;
        dst.sample.push_back(in.sample[k]);
        dst.feature.push_back(in.feature[k]);
        if (analog) dst.value.push_back(in.value[k]);
    }
    return {to_dataset(train, "train", rows, cols), to_dataset(test, "test", rows, cols)};
}

std::pair<Dataset, Dataset> carve_rows(const Dataset& data, double fraction, uint32_t seed) {
    if (!(fraction > 0.0 && fraction < 1.0)) {
        throw Error(ErrorCategory::kUsage, "validation fraction must be in (0, 1)");
    }
    NumpyLegacyRng rng(seed);
    Interactions kept, carved;
    const bool analog = !data.is_boolean();
    for (uint64_t r = 0; r < data.rows; ++r) {
        const uint64_t n = data.row_length(r);
        const auto take = static_cast<uint64_t>(std::llround(fraction * double(n)));
        std::vector<bool> out(n, false);
        if (take > 0) {
            const std::vector<uint64_t> p = rng.permutation(n);
            for (uint64_t i = 0; i < take; ++i) out[p[i]] = true;
        }
        for (uint64_t i = 0; i < n; ++i) {
            const uint64_t k = data.offsets[r] + i;
            Interactions& dst = out[i] ? carved : kept;
            dst.sample.push_back(static_cast<uint32_t>(r));
            dst.feature.push_back(data.indices[k]);
            if (analog) dst.value.push_back(data.values[k]);
        }
    }
    return {to_dataset(kept, data.name, data.rows, data.cols),
            to_dataset(carved, "validation", data.rows, data.cols)};
}

namespace {

// Entry k's position among its row's entries in `in`'s order, and each row's count.
void positions(const Interactions& in, uint64_t rows, std::vector<uint64_t>& position,
               std::vector<uint64_t>& count) {
    count.assign(rows, 0);
    position.resize(in.sample.size());
    for (size_t k = 0; k < in.sample.size(); ++k) {
        if (in.sample[k] >= rows) {
            throw Error(ErrorCategory::kInternal, "interaction " + std::to_string(k) + ": row " +
                                                      std::to_string(in.sample[k]) + " of " +
                                                      std::to_string(rows));
        }
        position[k] = count[in.sample[k]]++;
    }
}

void append(Interactions& to, const Interactions& from, size_t k) {
    to.sample.push_back(from.sample[k]);
    to.feature.push_back(from.feature[k]);
    if (!from.value.empty()) to.value.push_back(from.value[k]);
}

}  // namespace

std::pair<Interactions, Interactions> carve_last(const Interactions& in, uint64_t rows,
                                                 double fraction) {
    if (!(fraction > 0.0 && fraction < 1.0)) {
        throw Error(ErrorCategory::kUsage, "validation fraction must be in (0, 1)");
    }
    std::vector<uint64_t> position, count;
    positions(in, rows, position, count);
    Interactions kept, carved;
    for (size_t k = 0; k < in.sample.size(); ++k) {
        const uint64_t n = count[in.sample[k]];
        const auto take = static_cast<uint64_t>(std::llround(fraction * double(n)));
        append(position[k] >= n - take ? carved : kept, in, k);
    }
    return {std::move(kept), std::move(carved)};
}

Interactions recency_weighted(Interactions in, uint64_t rows, double tau) {
    if (!(tau > 0.0) || !std::isfinite(tau)) {
        throw Error(ErrorCategory::kUsage, "recency time constant must be finite and > 0");
    }
    std::vector<uint64_t> position, count;
    positions(in, rows, position, count);
    in.value.resize(in.sample.size());
    for (size_t k = 0; k < in.sample.size(); ++k) {
        const double age = double(count[in.sample[k]] - 1 - position[k]);
        in.value[k] = static_cast<float>(std::exp(-age / tau));
    }
    return in;
}

}  // namespace sparsenet
