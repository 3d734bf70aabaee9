// Host CSR dataset: the in-memory form of one DSSTNE dataset (one stored row per example, or,
// for Indexed datasets, per unique example).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sparsenet {

// Data conventions (every module and kernel cites this comment):
// - CSR: row r holds columns indices[offsets[r] .. offsets[r+1]), offsets has rows+1 entries,
//   64-bit; column indices are 32-bit and < cols; within a row indices are strictly increasing
//   (read_dataset sorts and rejects duplicates). values is empty for boolean (indicator) data,
//   meaning every stored entry is 1.0; otherwise values.size() == indices.size().
// - Dense tensors are row-major [rows, cols] with a leading dimension >= cols.
// - Indexed datasets (DSSTNE's Indexed attribute): `rows` counts the stored (unique) CSR rows
//   and example e uses stored row example_rows[e], so examples() may differ from rows. Code that
//   walks examples either calls expanded() or refuses indexed data; the engine binds expanded
//   copies (src/engine/network_bindings.cpp).
// - Dense datasets (stored densely in their file) are CSR in memory too, holding only the
//   nonzero entries; `dense` only tells the writer to write them back densely.
struct Dataset {
    std::string name;
    uint64_t rows = 0;  // stored CSR rows (examples, unless indexed)
    uint32_t cols = 0;  // features (DSSTNE's width)
    std::vector<uint64_t> offsets{0};
    std::vector<uint32_t> indices;
    std::vector<float> values;  // empty = boolean
    // Per-example weights (DSSTNE's dataWeight), one per example; empty = unweighted.
    std::vector<float> weights;
    // Indexed datasets: example e uses stored row example_rows[e]; empty = identity (one stored
    // row per example).
    std::vector<uint32_t> example_rows;
    // Stored densely in its file (DSSTNE's data<n>, no Sparse attribute). In memory it is CSR
    // like any other dataset; write_datasets writes it back as dense data.
    bool dense = false;
    // DSSTNE's SparseIgnoreZero attribute (bit 32): as a target, only the stored entries count in
    // the loss; absent columns are ignored instead of being targets of 0. Sparse datasets only
    // (validate rejects it on a dense one; DSSTNE ignores the bit there).
    bool sparse_ignore_zero = false;
    // The features index the dataset was converted with (label of column c at c), when it had
    // one; empty otherwise. Stored in the file as featureNames<n> (which DSSTNE ignores);
    // `sparsenet train` copies the names of its Input and Output layers' datasets into the model
    // file, so that the model resolves item names alone.
    std::vector<std::string> feature_names;

    bool is_boolean() const { return values.empty(); }
    bool is_indexed() const { return !example_rows.empty(); }
    bool is_weighted() const { return !weights.empty(); }
    uint64_t examples() const { return is_indexed() ? example_rows.size() : rows; }
    uint64_t nnz() const { return indices.size(); }
    uint64_t row_length(uint64_t r) const { return offsets[r + 1] - offsets[r]; }

    // The plain copy: one CSR row per example (stored rows repeated as example_rows says),
    // example_rows empty; weights, `dense` and `sparse_ignore_zero` are kept. A copy of *this when
    // not indexed.
    Dataset expanded() const;

    // Throws Error(kData) naming `context` (e.g. the file) when the CSR invariants above fail,
    // weights are not one finite value per example, an example_rows entry is >= rows, or a dense
    // dataset has sparse_ignore_zero.
    void validate(const std::string& context) const;

    // Reads dataset `name` (or the only/first one when name is empty) from a DSSTNE-layout
    // netCDF file. Accepts 32- and 64-bit sparseStart/sparseEnd, separate start/end arrays,
    // dense, Indexed and Weighted datasets (docs/data-format.md).
    static Dataset read(const std::string& path, const std::string& name = "");

    // Reads dataset `name` (or the only/first one when empty) like read(), keeping only the stored
    // entries whose column is in [first_col, last_col). The result keeps the full width (cols),
    // global column ids, every row (offsets for every stored row), the weights, example_rows and
    // flags, so it is a valid Dataset of the same shape holding a column band. The file is read
    // in chunks of rows, so memory peaks at about the kept entries plus one chunk (whatever the
    // file size). last_col > cols is clamped (and first_col with it: a band past the width is
    // empty); first_col > last_col is Error(kUsage). Every row read is checked as read() checks
    // it (indices against cols, duplicates, offsets), in and out of the band, with the same
    // errors. A band of a valued dataset that keeps no entry has empty values, so it reads as
    // boolean (as any dataset without entries does). read() is read_columns(path, name, 0,
    // UINT32_MAX). docs/data-format.md, "Reading a column band".
    static Dataset read_columns(const std::string& path, const std::string& name,
                                uint32_t first_col, uint32_t last_col);
};

// The shape of one dataset of a file, from its attributes and dimensions alone (no data read).
struct DatasetShape {
    std::string name;
    uint64_t rows = 0;      // stored rows (Dataset::rows)
    uint64_t examples = 0;  // Dataset::examples()
    uint32_t cols = 0;
    // Entries stored in the file: sparseIndex's length for sparse data (read()'s nnz() unless the
    // file holds entries no row refers to), rows x cols for dense data (read() drops the zeros),
    // rows for dense categorical data. So an upper bound of read()'s nnz().
    uint64_t nnz = 0;
    bool indexed = false;
    bool weighted = false;
    bool dense = false;
    bool boolean = false;  // no values (Dataset::is_boolean() of what read() returns)
};

// Dataset `name` (or the first one when empty) of a file: its shape as read() would return it,
// with every attribute, dimension, variable length and type checked as read() checks them (the
// same errors), but no data read.
DatasetShape read_dataset_shape(const std::string& path, const std::string& name = "");

// The entries of columns [first_col, last_col) as a dataset of width last_col - first_col with
// local column ids (id - first_col); rows, weights, example_rows and flags kept. `data` must
// satisfy the conventions above (rows sorted). last_col > cols is clamped like read_columns;
// first_col > last_col is Error(kUsage).
Dataset column_band(const Dataset& data, uint32_t first_col, uint32_t last_col);

// All datasets of one netCDF file, in file order.
std::vector<Dataset> read_datasets(const std::string& path);

// Names of the datasets in a file, in order, without reading their data.
std::vector<std::string> list_datasets(const std::string& path);

// Writes datasets into one netCDF-4 file in generateNetCDF's layout (uint64 offsets,
// deflate+shuffle, explicit chunking); dense datasets as data<n>, indexed and weighted ones with
// index<n> and dataWeight<n>, sparse_ignore_zero as the SparseIgnoreZero attribute bit. The file is
// written to a temporary name and renamed, so a failed write never leaves a partial file under
// `path`.
void write_datasets(const std::string& path, const std::vector<Dataset>& datasets);

// Options for the synthetic generator (sparsenet generate).
struct GenerateOptions {
    uint64_t users = 2000;
    uint32_t items = 1000;
    uint64_t nnz = 60000;              // target total interactions (actual count is reported)
    uint32_t factors = 16;             // planted latent topics
    double popularity_exponent = 1.0;  // Zipf exponent of item popularity
    double topic_focus = 0.8;          // probability that an interaction follows the user's topics
    uint32_t min_row = 2;              // minimum items per user
    uint64_t seed = 1;
    double holdout = 0.0;  // fraction of each user's items moved to the held-out set
};

struct GeneratedData {
    Dataset train;    // rows = users, cols = items
    Dataset heldout;  // same shape; empty rows when holdout == 0
};

// Seeded, deterministic whatever the thread count. Plants user/item topic structure and
// power-law item popularity; users' lengths are heavy-tailed.
GeneratedData generate(const GenerateOptions& options);

// The planted topic (0 .. factors-1) of every item, as generate() assigns it (for tests and
// diagnostics).
std::vector<uint32_t> item_topics(const GenerateOptions& options);

}  // namespace sparsenet
