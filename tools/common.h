// Helpers shared by the subcommands: running with uniform error reporting, loading datasets.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"

namespace sparsenet::cli {

// Runs body; maps sparsenet::Error to "sparsenet <command>: error: ..." on stderr and an exit
// code (2 for usage errors, 1 for everything else). Returns the exit code.
int run_command(const std::string& command, const std::function<int()>& body);

// Reads every dataset of each file (a file named twice is read once). The same dataset name in
// two different files is an error.
std::map<std::string, Dataset> load_datasets(const std::vector<std::string>& paths);

std::map<std::string, const Dataset*> pointers(const std::map<std::string, Dataset>& datasets);

// The non-empty comma-separated items of `list` (option --names a,b); none is Error(kUsage)
// naming `option`.
std::vector<std::string> split_list(const std::string& list, const std::string& option);

// Fails early (before hours of training) if `path` cannot be created.
void check_writable(const std::string& path);

// Applies --threads to OpenMP/OpenBLAS (0 = leave the defaults).
void set_threads(int threads);

}  // namespace sparsenet::cli
