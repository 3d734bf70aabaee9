// Dataset::read_columns (one column band of a dataset file, read in chunks of rows, as each rank
// reads its shard under model parallelism), read_dataset_shape and column_band.
//
// Chunk size: the public functions read io::kReadChunkEntries entries a chunk; these tests call
// io::read_columns (src/io/dataset_read.h), which takes the chunk size as a parameter, with tiny
// chunks (1, 3, 17 entries) so that chunks end between rows, rows longer than a chunk are read
// alone, and blocks of sparseStart/sparseEnd end inside the dataset.
#include <gtest/gtest.h>
#include <netcdf.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "io/dataset_read.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "support/netcdf_test_util.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::contains;
using testing::expect_error;
using testing::expect_same_dataset;
using testing::RowShape;
using testing::TempDir;

// 0 stands for the public Dataset::read_columns (the default chunk).
constexpr uint64_t kChunks[] = {1, 3, 17, 0};
constexpr uint32_t kPieces[] = {1, 2, 3, 7};
constexpr uint32_t kAll = std::numeric_limits<uint32_t>::max();

using testing::nc_ok;

Dataset read_band(const std::string& path, const std::string& name, uint32_t first, uint32_t last,
                  uint64_t chunk) {
    return chunk == 0 ? Dataset::read_columns(path, name, first, last)
                      : io::read_columns(path, name, first, last, chunk);
}

// [0, cols) cut into `pieces` contiguous bands, as an engine shards columns over ranks.
std::vector<std::pair<uint32_t, uint32_t>> partition(uint32_t cols, uint32_t pieces) {
    std::vector<std::pair<uint32_t, uint32_t>> bands;
    for (uint32_t p = 0; p < pieces; ++p) {
        bands.emplace_back(static_cast<uint32_t>(uint64_t{cols} * p / pieces),
                           static_cast<uint32_t>(uint64_t{cols} * (p + 1) / pieces));
    }
    return bands;
}

// The entries of `full` in columns [first, last), global ids, everything else kept: what
// read_columns must return (written as plainly as possible, entry by entry).
Dataset filter_columns(const Dataset& full, uint32_t first, uint32_t last) {
    Dataset out = full;
    out.indices.clear();
    out.values.clear();
    out.offsets.assign(1, 0);
    for (uint64_t r = 0; r < full.rows; ++r) {
        for (uint64_t k = full.offsets[r]; k < full.offsets[r + 1]; ++k) {
            if (full.indices[k] < first || full.indices[k] >= last) continue;
            out.indices.push_back(full.indices[k]);
            if (!full.values.empty()) out.values.push_back(full.values[k]);
        }
        out.offsets.push_back(out.indices.size());
    }
    return out;
}

// Every band of every partition, at every chunk size: the band is `full` filtered to its
// columns, a valid dataset of full's shape; the bands joined row by row give `full` back; and
// column_band gives the same entries with local ids.
void expect_bands_partition(const std::string& path, const Dataset& full) {
    for (const uint32_t pieces : kPieces) {
        for (const uint64_t chunk : kChunks) {
            const std::string what = "dataset " + full.name + ", " + std::to_string(pieces) +
                                     " pieces, chunk " + std::to_string(chunk);
            Dataset joined = full;
            std::vector<std::vector<uint32_t>> row_indices(full.rows);
            std::vector<std::vector<float>> row_values(full.rows);
            for (const auto& [first, last] : partition(full.cols, pieces)) {
                const Dataset band = read_band(path, full.name, first, last, chunk);
                band.validate(what);
                expect_same_dataset(
                    band, filter_columns(full, first, last),
                    what + ", band [" + std::to_string(first) + ", " + std::to_string(last) + ")");
                for (uint64_t r = 0; r < band.rows; ++r) {
                    for (uint64_t k = band.offsets[r]; k < band.offsets[r + 1]; ++k) {
                        row_indices[r].push_back(band.indices[k]);
                        if (!band.values.empty()) row_values[r].push_back(band.values[k]);
                    }
                }
                if (chunk != 0) continue;
                const Dataset local = column_band(full, first, last);
                local.validate(what);
                EXPECT_EQ(local.cols, last - first) << what;
                EXPECT_EQ(local.rows, full.rows) << what;
                EXPECT_EQ(local.offsets, band.offsets) << what;
                EXPECT_EQ(local.values, band.values) << what;
                EXPECT_EQ(local.weights, full.weights) << what;
                EXPECT_EQ(local.example_rows, full.example_rows) << what;
                EXPECT_EQ(local.dense, full.dense) << what;
                EXPECT_EQ(local.sparse_ignore_zero, full.sparse_ignore_zero) << what;
                ASSERT_EQ(local.indices.size(), band.indices.size()) << what;
                for (size_t k = 0; k < local.indices.size(); ++k) {
                    ASSERT_EQ(local.indices[k] + first, band.indices[k]) << what << ", entry " << k;
                }
            }
            joined.indices.clear();
            joined.values.clear();
            joined.offsets.assign(1, 0);
            for (uint64_t r = 0; r < full.rows; ++r) {
                joined.indices.insert(joined.indices.end(), row_indices[r].begin(),
                                      row_indices[r].end());
                joined.values.insert(joined.values.end(), row_values[r].begin(),
                                     row_values[r].end());
                joined.offsets.push_back(joined.indices.size());
            }
            expect_same_dataset(joined, full, what + ", bands joined");
        }
    }
}

// One file holding every kind of dataset.
std::vector<Dataset> every_kind() {
    std::vector<Dataset> kinds;
    kinds.push_back(testing::random_dataset(300, 50, RowShape::kEmptyRows, false, 1, "boolean"));
    kinds.push_back(testing::random_dataset(200, 40, RowShape::kPowerLaw, true, 2, "valued"));
    Dataset indexed = testing::random_dataset(60, 30, RowShape::kUniform, true, 3, "indexed");
    for (uint32_t e = 0; e < 150; ++e) {
        indexed.example_rows.push_back((e * 7) % 60);
        indexed.weights.push_back(0.5f + static_cast<float>(e % 4));
    }
    kinds.push_back(indexed);
    Dataset weighted = testing::random_dataset(80, 20, RowShape::kEmptyRows, true, 4, "weighted");
    weighted.weights.assign(80, 2.0f);
    weighted.weights[5] = 0.0f;
    kinds.push_back(weighted);
    Dataset dense = testing::random_dataset(40, 12, RowShape::kUniform, true, 5, "dense");
    dense.dense = true;
    dense.weights.assign(40, 1.5f);
    kinds.push_back(dense);
    Dataset label = testing::random_dataset(50, 9, RowShape::kOneNonzero, false, 6, "label");
    label.dense = true;  // categorical: one class per row
    kinds.push_back(label);
    Dataset targets = testing::random_dataset(70, 25, RowShape::kEmptyRows, true, 7, "targets");
    targets.sparse_ignore_zero = true;
    kinds.push_back(targets);
    Dataset empty = testing::random_dataset(20, 10, RowShape::kOneNonzero, false, 8, "empty");
    empty.indices.clear();
    empty.offsets.assign(21, 0);
    kinds.push_back(empty);
    Dataset no_rows = testing::random_dataset(0, 10, RowShape::kUniform, true, 9, "no_rows");
    kinds.push_back(no_rows);
    return kinds;
}

TEST(DatasetColumns, BandsOfEveryKindPartitionRead) {
    TempDir dir;
    const std::string path = dir.file("kinds.nc");
    const std::vector<Dataset> kinds = every_kind();
    write_datasets(path, kinds);
    for (const Dataset& original : kinds) {
        const Dataset full = Dataset::read(path, original.name);
        expect_same_dataset(full, original, "read() of " + original.name);
        expect_same_dataset(Dataset::read_columns(path, original.name, 0, kAll), full,
                            "whole band of " + original.name);
        expect_bands_partition(path, full);
    }
    // The first dataset when the name is empty.
    expect_same_dataset(Dataset::read_columns(path, "", 10, 20), filter_columns(kinds[0], 10, 20),
                        "unnamed");
}

TEST(DatasetColumns, BandsWithoutEntriesAndBandsPastTheWidth) {
    TempDir dir;
    const std::string path = dir.file("band.nc");
    Dataset d = testing::random_dataset(100, 30, RowShape::kPowerLaw, true, 11, "items");
    d.cols = 45;  // columns 30..44 hold nothing
    write_datasets(path, {d});
    for (const uint64_t chunk : kChunks) {
        const std::string what = "chunk " + std::to_string(chunk);
        for (const auto& [first, last] : std::vector<std::pair<uint32_t, uint32_t>>{
                 {30, 45}, {0, 0}, {12, 12}, {45, 45}, {40, 1000}}) {
            const Dataset band = read_band(path, "items", first, last, chunk);
            band.validate(what);
            EXPECT_EQ(band.rows, 100u) << what;
            EXPECT_EQ(band.cols, 45u) << what;
            EXPECT_EQ(band.nnz(), 0u) << what;
            EXPECT_EQ(band.offsets, std::vector<uint64_t>(101, 0)) << what;
        }
        // last_col past the width is clamped, and so is a band that starts past it.
        expect_same_dataset(read_band(path, "items", 20, kAll, chunk), filter_columns(d, 20, 45),
                            what);
        expect_same_dataset(read_band(path, "items", 50, 60, chunk), filter_columns(d, 0, 0), what);
        const std::string msg =
            expect_error([&] { read_band(path, "items", 5, 4, chunk); }, ErrorCategory::kUsage);
        EXPECT_TRUE(contains(msg, path)) << msg;
        EXPECT_TRUE(contains(msg, "first column 5 > last column 4")) << msg;
    }
    // column_band: local ids, width last - first (clamped like read_columns).
    EXPECT_EQ(column_band(d, 30, 45).nnz(), 0u);
    EXPECT_EQ(column_band(d, 30, 45).cols, 15u);
    EXPECT_EQ(column_band(d, 40, 1000).cols, 5u);
    EXPECT_EQ(column_band(d, 50, 60).cols, 0u);
    expect_error([&] { column_band(d, 2, 1); }, ErrorCategory::kUsage);
}

TEST(DatasetColumns, ColumnBandKeepsRowsAndUsesLocalIds) {
    Dataset d;
    d.name = "x";
    d.cols = 10;
    d.rows = 3;
    d.offsets = {0, 3, 3, 6};
    d.indices = {1, 4, 9, 0, 5, 6};
    d.values = {1, 2, 3, 4, 5, 6};
    d.example_rows = {2, 0, 1, 2};
    d.weights = {1, 2, 3, 4};
    const Dataset band = column_band(d, 4, 7);
    EXPECT_EQ(band.cols, 3u);
    EXPECT_EQ(band.rows, 3u);
    EXPECT_EQ(band.offsets, (std::vector<uint64_t>{0, 1, 1, 3}));
    EXPECT_EQ(band.indices, (std::vector<uint32_t>{0, 1, 2}));
    EXPECT_EQ(band.values, (std::vector<float>{2, 5, 6}));
    EXPECT_EQ(band.example_rows, d.example_rows);
    EXPECT_EQ(band.weights, d.weights);
    band.validate("band");
}

// ---------------------------------------------------------------- layouts and types of other
// writers

// A sparse dataset spelled out as DSSTNE's variables, for layouts and types write_datasets never
// writes: rows anywhere in sparseIndex, overlapping or with entries between them, any types.
struct RawSparse {
    std::string name = "raw";
    unsigned attributes = 1;  // Sparse (analog)
    unsigned width = 0;
    nc_type offset_type = NC_UINT;
    nc_type index_type = NC_UINT;
    nc_type value_type = NC_FLOAT;  // NC_NAT: no sparseData (boolean)
    std::vector<long long> starts, ends, indices;
    std::vector<double> values;

    void write(const std::string& path) const {
        int nc, rows_dim, data_dim, values_dim, start, end, index, data = -1;
        nc_ok(nc_create(path.c_str(), NC_NETCDF4 | NC_CLOBBER, &nc));
        const unsigned one = 1;
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, "datasets", NC_UINT, 1, &one));
        nc_ok(nc_put_att_text(nc, NC_GLOBAL, "name0", name.size(), name.c_str()));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, "attributes0", NC_UINT, 1, &attributes));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, "width0", NC_UINT, 1, &width));
        nc_ok(nc_def_dim(nc, "examplesDim0", starts.size(), &rows_dim));
        nc_ok(nc_def_dim(nc, "sparseDataDim0", indices.size(), &data_dim));
        nc_ok(nc_def_dim(nc, "valuesDim0", values.size(), &values_dim));
        nc_ok(nc_def_var(nc, "sparseStart0", offset_type, 1, &rows_dim, &start));
        nc_ok(nc_def_var(nc, "sparseEnd0", offset_type, 1, &rows_dim, &end));
        nc_ok(nc_def_var(nc, "sparseIndex0", index_type, 1, &data_dim, &index));
        if (value_type != NC_NAT) {
            nc_ok(nc_def_var(nc, "sparseData0", value_type, 1, &values_dim, &data));
        }
        nc_ok(nc_enddef(nc));
        if (!starts.empty()) {
            nc_ok(nc_put_var_longlong(nc, start, starts.data()));
            nc_ok(nc_put_var_longlong(nc, end, ends.data()));
        }
        if (!indices.empty()) nc_ok(nc_put_var_longlong(nc, index, indices.data()));
        if (data >= 0 && !values.empty()) nc_ok(nc_put_var_double(nc, data, values.data()));
        nc_ok(nc_close(nc));
    }

    // What any reader must make of it: row r is the stored entries [starts[r], ends[r]) sorted
    // by column (values move with their columns).
    Dataset expected() const {
        Dataset d;
        d.name = name;
        d.cols = width;
        d.rows = starts.size();
        for (size_t r = 0; r < starts.size(); ++r) {
            std::vector<std::pair<uint32_t, float>> row;
            for (long long k = starts[r]; k < ends[r]; ++k) {
                row.emplace_back(static_cast<uint32_t>(indices[k]),
                                 value_type == NC_NAT ? 1.0f : static_cast<float>(values[k]));
            }
            std::sort(row.begin(), row.end());
            for (const auto& [c, v] : row) {
                d.indices.push_back(c);
                if (value_type != NC_NAT) d.values.push_back(v);
            }
            d.offsets.push_back(d.indices.size());
        }
        return d;
    }
};

// `rows` rows scattered over sparseIndex: runs of distinct columns in shuffled order stored in
// random order with unreferenced entries (beyond the width) between them; each row takes a piece
// of a random run, so rows overlap, repeat and come in any order; a few are empty with arbitrary
// starts.
RawSparse scattered(uint64_t rows, unsigned width, uint64_t seed) {
    std::mt19937_64 rng(seed);
    RawSparse raw;
    raw.width = width;
    struct Run {
        long long begin, length;
    };
    std::vector<Run> runs;
    for (int j = 0; j < 40; ++j) {
        if (rng() % 2 == 0) {  // an entry no row refers to
            raw.indices.push_back(width + 7);
            raw.values.push_back(-1.0);
        }
        std::vector<uint32_t> columns(width);
        for (uint32_t c = 0; c < width; ++c) columns[c] = c;
        std::shuffle(columns.begin(), columns.end(), rng);
        const long long length = 1 + static_cast<long long>(rng() % width);
        runs.push_back({static_cast<long long>(raw.indices.size()), length});
        for (long long k = 0; k < length; ++k) {
            raw.indices.push_back(columns[k]);
            raw.values.push_back(static_cast<double>(rng() % 100) / 8.0 + 0.125);
        }
    }
    for (uint64_t r = 0; r < rows; ++r) {
        if (rng() % 6 == 0) {
            const long long at = static_cast<long long>(rng() % (raw.indices.size() + 1));
            raw.starts.push_back(at);
            raw.ends.push_back(at);
            continue;
        }
        const Run& run = runs[rng() % runs.size()];
        const long long a = static_cast<long long>(rng() % run.length);
        const long long b = a + 1 + static_cast<long long>(rng() % (run.length - a));
        raw.starts.push_back(run.begin + a);
        raw.ends.push_back(run.begin + b);
    }
    return raw;
}

TEST(DatasetColumns, ScatteredOverlappingUnsortedRowsOfAnyType) {
    TempDir dir;
    const std::string path = dir.file("scattered.nc");
    for (const auto& [offsets, index, values] :
         std::vector<std::tuple<nc_type, nc_type, nc_type>>{{NC_UINT, NC_UINT, NC_FLOAT},
                                                            {NC_INT64, NC_INT64, NC_DOUBLE},
                                                            {NC_INT, NC_USHORT, NC_NAT}}) {
        RawSparse raw = scattered(150, 23, 100 + offsets);
        raw.offset_type = offsets;
        raw.index_type = index;
        raw.value_type = values;
        if (values == NC_NAT) raw.attributes = 3;  // Sparse | Boolean
        raw.write(path);
        const Dataset full = Dataset::read(path);
        expect_same_dataset(full, raw.expected(), "read()");
        expect_bands_partition(path, full);
    }
}

// Rows stored back to back but in reverse order, and rows longer than a chunk.
TEST(DatasetColumns, ReversedRowsAndLongRows) {
    TempDir dir;
    const std::string path = dir.file("reversed.nc");
    const Dataset d = testing::random_dataset(90, 64, RowShape::kPowerLaw, true, 21, "raw");
    RawSparse raw;
    raw.width = d.cols;
    raw.starts.assign(d.rows, 0);
    raw.ends.assign(d.rows, 0);
    for (uint64_t r = d.rows; r-- > 0;) {
        raw.starts[r] = static_cast<long long>(raw.indices.size());
        for (uint64_t k = d.offsets[r + 1]; k-- > d.offsets[r];) {  // each row backwards too
            raw.indices.push_back(d.indices[k]);
            raw.values.push_back(d.values[k]);
        }
        raw.ends[r] = static_cast<long long>(raw.indices.size());
    }
    raw.write(path);
    const Dataset full = Dataset::read(path);
    expect_same_dataset(full, d, "read()");
    expect_bands_partition(path, full);
}

// ---------------------------------------------------------------- errors

// The error read() gives for `path`, and the same error from bands of every kind (the whole
// width, the first and last column, an empty band, a band far from the damage) at every chunk
// size: every row read is checked in full, inside the band or not.
void expect_same_error(const std::string& path, const std::string& name, uint32_t cols,
                       ErrorCategory category, const std::vector<std::string>& mentions) {
    const std::string msg = expect_error([&] { Dataset::read(path, name); }, category);
    EXPECT_TRUE(contains(msg, path)) << msg;
    for (const std::string& m : mentions) {
        EXPECT_TRUE(contains(msg, m)) << "missing '" << m << "' in: " << msg;
    }
    const std::vector<std::pair<uint32_t, uint32_t>> bands = {
        {0, kAll}, {0, 1}, {cols - 1, cols}, {cols / 2, cols / 2}, {cols + 5, kAll}};
    for (const uint64_t chunk : kChunks) {
        for (const auto& band : bands) {
            // band.first / band.second, not a structured binding: C++17 lambdas cannot capture
            // one (Clang before 16 refuses it).
            const uint32_t first = band.first, last = band.second;
            const std::string band_msg =
                expect_error([&] { read_band(path, name, first, last, chunk); }, category);
            EXPECT_EQ(band_msg, msg) << "band [" << first << ", " << last << "), chunk " << chunk;
        }
    }
}

// A small valid dataset as raw variables: 6 rows over width 10.
//   0: {1, 4}  1: {}  2: {0, 3, 9}  3: {2}  4: {5, 6, 7, 8}  5: {9}
RawSparse small_raw() {
    RawSparse raw;
    raw.name = "input";
    raw.width = 10;
    raw.starts = {0, 2, 2, 5, 6, 10};
    raw.ends = {2, 2, 5, 6, 10, 11};
    raw.indices = {1, 4, 0, 3, 9, 2, 5, 6, 7, 8, 9};
    raw.values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    return raw;
}

TEST(DatasetColumnsErrors, BadRowsGiveReadsErrors) {
    TempDir dir;
    const std::string path = dir.file("bad.nc");
    small_raw().write(path);
    expect_bands_partition(path, Dataset::read(path));

    struct Damage {
        std::function<void(RawSparse&)> apply;
        std::string message;  // what read()'s message says
    };
    const std::vector<Damage> damages = {
        {[](RawSparse& raw) { raw.indices[8] = 10; },  // row 4: 5 6 10 8
         "dataset input: row 4: column index 10 >= width 10"},
        {[](RawSparse& raw) {
             raw.indices[2] = 9;    // row 2: 9 3 9, a duplicate once sorted
             raw.indices[10] = 12;  // and row 5 beyond the width: row 2 comes first
         },
         "row 2: duplicate column 9"},
        {[](RawSparse& raw) { raw.ends[3] = 4; }, "row 3: sparseEnd 4 < sparseStart 5"},
        {[](RawSparse& raw) { raw.ends[5] = 12; },
         "row 5: sparseEnd 12 is beyond the 11 stored nonzeros (sparseIndex0)"},
        {[](RawSparse& raw) {
             raw.index_type = NC_INT64;
             raw.indices[6] = -1;
         },
         "variable 'sparseIndex0' element 6 is -1"},
        {[](RawSparse& raw) {
             raw.offset_type = NC_INT;
             raw.starts[3] = -5;
         },
         "variable 'sparseStart0' element 3 is -5"},
        {[](RawSparse& raw) { raw.values.pop_back(); },
         "sparseData0 has 10 entries; expected 11 (one per sparseIndex entry)"},
        {[](RawSparse& raw) {
             raw.value_type = NC_DOUBLE;
             raw.values[3] = 1e300;
         },
         "variable 'sparseData0' holds values outside float's range"},
        {[](RawSparse& raw) { raw.offset_type = NC_FLOAT; },
         "variable 'sparseStart0' has type float; expected an integer type"},
    };
    for (const Damage& damage : damages) {
        RawSparse raw = small_raw();
        damage.apply(raw);
        raw.write(path);
        expect_same_error(path, "input", 10, ErrorCategory::kData, {damage.message});
    }

    small_raw().write(path);
    const std::string msg =
        expect_error([&] { Dataset::read(path, "target"); }, ErrorCategory::kData);
    EXPECT_EQ(
        expect_error([&] { Dataset::read_columns(path, "target", 0, 3); }, ErrorCategory::kData),
        msg);
    EXPECT_TRUE(contains(msg, "no dataset named 'target'; datasets present: input")) << msg;
}

// Writes `datasets`, then overwrites one element of a variable with `value`.
void write_then_patch(const std::string& path, const std::vector<Dataset>& datasets,
                      const std::string& var, size_t element, double value) {
    write_datasets(path, datasets);
    int nc, id;
    nc_ok(nc_open(path.c_str(), NC_WRITE, &nc));
    nc_ok(nc_inq_varid(nc, var.c_str(), &id));
    nc_ok(nc_put_var1_double(nc, id, &element, &value));
    nc_ok(nc_close(nc));
}

TEST(DatasetColumnsErrors, OtherKindsGiveReadsErrors) {
    TempDir dir;
    const std::string path = dir.file("bad.nc");
    const std::vector<Dataset> kinds = every_kind();
    const Dataset& indexed = kinds[2];
    const Dataset& label = kinds[5];
    write_then_patch(path, {indexed}, "index0", 3, 60);
    expect_same_error(path, "indexed", 30, ErrorCategory::kData,
                      {"example 3: variable 'index0' holds row 60; expected a stored row < 60"});
    write_then_patch(path, {indexed}, "dataWeight0", 7, std::nan(""));
    expect_same_error(path, "indexed", 30, ErrorCategory::kData,
                      {"example 7: variable 'dataWeight0' holds nan"});
    write_then_patch(path, {indexed}, "sparseIndex0", 100, 31);
    expect_same_error(path, "indexed", 30, ErrorCategory::kData, {"column index 31 >= width 30"});
    write_then_patch(path, {label}, "data0", 33, 9);
    expect_same_error(path, "label", 9, ErrorCategory::kData,
                      {"row 33: class index 9 in 'data0' >= width 9"});
}

TEST(DatasetColumnsErrors, TruncatedFile) {
    TempDir dir;
    const std::string good = dir.file("good.nc");
    write_datasets(good, {testing::random_dataset(5000, 2000, RowShape::kPowerLaw, true, 10)});
    const std::string bytes = testing::read_file(good);
    ASSERT_GT(bytes.size(), 10000u);
    const std::string path = dir.file("truncated.nc");
    testing::write_file(path, bytes.substr(0, bytes.size() / 2));
    expect_same_error(path, "data", 2000, ErrorCategory::kIo, {"truncated or corrupt"});
}

// ---------------------------------------------------------------- read_dataset_shape

TEST(DatasetShape, MatchesReadWithoutReadingData) {
    TempDir dir;
    const std::string path = dir.file("kinds.nc");
    write_datasets(path, every_kind());
    for (const Dataset& full : read_datasets(path)) {
        SCOPED_TRACE(full.name);
        const DatasetShape shape = read_dataset_shape(path, full.name);
        EXPECT_EQ(shape.name, full.name);
        EXPECT_EQ(shape.rows, full.rows);
        EXPECT_EQ(shape.examples, full.examples());
        EXPECT_EQ(shape.cols, full.cols);
        EXPECT_EQ(shape.indexed, full.is_indexed());
        EXPECT_EQ(shape.weighted, full.is_weighted());
        EXPECT_EQ(shape.dense, full.dense);
        const bool categorical = full.name == "label";
        if (full.nnz() > 0) {
            EXPECT_EQ(shape.boolean, full.is_boolean());
        }
        if (!full.dense) {
            EXPECT_EQ(shape.nnz, full.nnz());
        } else {
            EXPECT_EQ(shape.nnz, categorical ? full.rows : full.rows * full.cols);
        }
    }
    EXPECT_EQ(read_dataset_shape(path).name, "boolean");

    // Only attributes, dimensions and variable shapes are read: damaged data goes unnoticed,
    // a wrong shape is read()'s error.
    RawSparse raw = small_raw();
    raw.indices[8] = 10;
    raw.write(path);
    const DatasetShape shape = read_dataset_shape(path);
    EXPECT_EQ(shape.rows, 6u);
    EXPECT_EQ(shape.nnz, 11u);
    EXPECT_FALSE(shape.boolean);
    raw = small_raw();
    raw.values.pop_back();
    raw.write(path);
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_EQ(expect_error([&] { read_dataset_shape(path); }, ErrorCategory::kData), msg);
    EXPECT_EQ(expect_error([&] { read_dataset_shape(path, "nope"); }, ErrorCategory::kData),
              expect_error([&] { Dataset::read(path, "nope"); }, ErrorCategory::kData));
}

}  // namespace
}  // namespace sparsenet
