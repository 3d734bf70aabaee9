// The chunked dataset reader behind Dataset::read and Dataset::read_columns, with its chunk size
// as a parameter (tests pass tiny chunks so that rows straddle chunks).
#pragma once

#include <cstdint>
#include <string>

#include "sparsenet/dataset.h"

namespace sparsenet::io {

// Stored entries (sparse data), values (dense data: whole rows, at least one) or class indices
// (categorical data) read per chunk by the public functions: 4 MiB of indices, plus 4 MiB of
// values when the data has any, the size of one of write_datasets' storage chunks.
constexpr uint64_t kReadChunkEntries = uint64_t{1} << 20;

// Dataset::read_columns with chunks of `chunk_entries` (0 counts as 1). A sparse chunk holds
// whole rows: consecutive rows are grouped while their entries fit, and a longer row is a chunk
// of its own. Rows are also read in blocks of `chunk_entries` for sparseStart/sparseEnd.
Dataset read_columns(const std::string& path, const std::string& name, uint32_t first_col,
                     uint32_t last_col, uint64_t chunk_entries);

}  // namespace sparsenet::io
