// Evaluation splits (the engine of `sparsenet split`); protocols in docs/data-pipeline.md.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "sparsenet/convert.h"
#include "sparsenet/dataset.h"

namespace sparsenet {

// numpy's legacy global random stream (np.random.seed / RandomState), bit for bit: MT19937
// seeded with init_genrand, bounded integers by masked rejection. Used so that our splits are
// the very splits of the reference Python code (vae_cf's strong generalization).
class NumpyLegacyRng {
  public:
    explicit NumpyLegacyRng(uint32_t seed) : mt_(seed) {}
    // A uniform integer in [0, max] (numpy's random_interval).
    uint64_t interval(uint64_t max);
    // np.random.permutation(n).
    std::vector<uint64_t> permutation(uint64_t n);

  private:
    std::mt19937 mt_;
};

// Protocol B, strong generalization (Liang et al. 2018, dawenl/vae_cf): users with at least
// min_items interactions, permuted with `seed`; the last 2 x heldout_users are validation and
// test users; items are those of training users (first-seen order); for each held-out user with
// at least min_items items, floor(heldout_fraction x n) items (numpy's choice) are to predict and
// the rest are the fold-in input.
struct StrongSplitOptions {
    uint32_t min_items = 5;
    uint64_t heldout_users = 10000;
    double heldout_fraction = 0.2;
    uint32_t seed = 98765;
};

struct StrongSplit {
    LabelIndex items;                                      // columns of every dataset
    LabelIndex train_users, validation_users, test_users;  // rows, in permuted order
    Dataset train;
    Dataset validation_fold_in, validation_heldout;
    Dataset test_fold_in, test_heldout;
    uint64_t users_kept = 0;  // users with >= min_items interactions
};

// `in` is in file order with ids into `users` and `items` (read_interactions).
StrongSplit strong_generalization_split(const Interactions& in, const LabelIndex& users,
                                        const LabelIndex& items, const StrongSplitOptions& options);

// Protocol C (DSSTNE's): floor(test_fraction x nnz) interactions, drawn by a seeded permutation
// of all of them, go to test; the rest to train. Both datasets keep all rows and columns.
std::pair<Dataset, Dataset> random_split(const Interactions& in, uint64_t rows, uint32_t cols,
                                         double test_fraction, uint32_t seed);

// For protocol A's honest model selection: moves round(fraction x n) of each row's n items,
// chosen by a seeded permutation, from `data` to a second dataset of the same shape.
// Returns {kept, carved}.
std::pair<Dataset, Dataset> carve_rows(const Dataset& data, double fraction, uint32_t seed);

// The same hold-out by position instead of chance: the last round(fraction x n) of each row's
// n interactions in the order `in` lists them (a file's order) go to the second set. When each
// user's items are listed oldest first this holds out the latest ones, as a temporal test split
// does (docs/quality.md: Gowalla's published split is one). Both keep `in`'s order.
std::pair<Interactions, Interactions> carve_last(const Interactions& in, uint64_t rows,
                                                 double fraction);

// `in` with values that weigh each interaction by how late its row lists it:
// exp(-age / tau), age = the number of the same row's interactions listed after it (the last
// listed weighs 1, the one before exp(-1 / tau), ...). tau > 0.
Interactions recency_weighted(Interactions in, uint64_t rows, double tau);

}  // namespace sparsenet
