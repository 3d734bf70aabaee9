// Reading DSSTNE's recommendation files ('name<TAB>item,score:item,score:...', the format that
// `sparsenet predict -s` writes) back into a TopK aligned with a held-out dataset, so that any
// recommender (a Python peer, a DSSTNE run) can be scored by `sparsenet evaluate --recs`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/predictor.h"

namespace sparsenet::cli {

struct RecsReadOptions {
    // Sample names by row (a samples index); empty: users are written as row numbers.
    const std::vector<std::string>* sample_names = nullptr;
    // Item names by column (a features index); empty: items are written as column numbers.
    const std::vector<std::string>* feature_names = nullptr;
    uint64_t rows = 0;   // rows of the TopK (the held-out dataset's)
    uint32_t items = 0;  // catalogue size: item columns must be below it
    uint32_t k = 0;      // slots kept per row
    // Items of a user's row here are dropped from that user's list (rows beyond its last row
    // have none); nullptr: nothing dropped. Not indexed.
    const Dataset* drop = nullptr;
};

struct RecsFile {
    TopK top;                   // [rows, k]; rows absent from the file have no items
    std::vector<bool> listed;   // by row: the file has a line for it
    uint64_t lines = 0;         // user lines read
    uint64_t outside_rows = 0;  // users named by the index whose row is >= rows (ignored)
    uint64_t dropped = 0;       // list entries dropped because `drop` holds them
    uint64_t longest = 0;       // the longest list in the file, before dropping
    uint64_t short_lists = 0;   // listed rows left with fewer than k items
};

// Every malformed line is Error(kData) "path:line: ..." saying what was expected: no tab, an
// entry that is not 'item,score', a score that is not a number, scores not in descending order,
// an unknown user or item, a user on two lines, an item listed twice for one user.
RecsFile read_recs(const std::string& path, const RecsReadOptions& options);

}  // namespace sparsenet::cli
