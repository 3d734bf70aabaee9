// DSSTNE index files: one "label<TAB>index" line per sample or feature.
#pragma once

#include <string>
#include <vector>

namespace sparsenet {

// Returns labels by index. Indices must be 0..n-1, each exactly once; labels unique.
// Errors (Error kData / kIo) name the file and line.
std::vector<std::string> read_index(const std::string& path);

// Writes labels[i] with index i, one line each, via a temporary file and rename.
void write_index(const std::string& path, const std::vector<std::string>& labels);

}  // namespace sparsenet
