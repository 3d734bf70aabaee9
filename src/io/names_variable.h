// Label lists (a features index) stored inside a netCDF file: one NC_CHAR variable holding the
// labels joined by '\n' on its own dimension "<var>Length", compressed. Dataset files carry their
// features index this way (featureNames<n>) and model files the names of their layers' units
// (layer<i>_featureNames), so that a model resolves item names with no other file. DSSTNE's
// readers ignore variables they do not know.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sparsenet::io {

// Defines variable `var` (define mode); returns its id. Labels must not hold '\n'
// (Error(kData) naming `path` and the label otherwise).
int define_names(int nc, const std::string& path, const std::string& var,
                 const std::vector<std::string>& labels);
// Writes the labels into the variable defined by define_names (data mode).
void put_names(int nc, const std::string& path, int var_id, const std::vector<std::string>& labels);
// The labels of variable `var`, or nullopt when the file has no such variable. Error(kIo) naming
// `path` and `var` when it is not a 1-D char variable.
std::optional<std::vector<std::string>> read_names(int nc, const std::string& path,
                                                   const std::string& var);

}  // namespace sparsenet::io
