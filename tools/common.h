// Helpers shared by the subcommands: running with uniform error reporting, loading datasets.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"

namespace sparsenet::cli {

// Runs body; maps sparsenet::Error to "sparsenet <command>: error: ..." on stderr and an exit
// code (2 for usage errors, 1 for everything else); std::bad_alloc to exit code 1 and
// host_out_of_memory_message(); any other exception to "internal error" and 3. Returns the exit
// code.
int run_command(const std::string& command, const std::function<int()>& body);

// What the CLI says for a std::bad_alloc: out of host memory, the address-space limit when one is
// set, and what to change (--batch, the network's size, more ranks).
std::string host_out_of_memory_message();

// Reads every dataset of each file (a file named twice is read once). The same dataset name in
// two different files is an error.
// With a config and ranks > 1 (a network split over an MPI job), every dataset that Input or
// Output layers read holds only this rank's band of columns (Dataset::read_columns), as the
// engine bands those layers; the others are read whole.
std::map<std::string, Dataset> load_datasets(const std::vector<std::string>& paths,
                                             const NetworkConfig* config = nullptr, int ranks = 1,
                                             int rank = 0);
// One file's datasets, as load_datasets reads them.
std::vector<Dataset> read_split(const std::string& path, const NetworkConfig* config, int ranks,
                                int rank);

// The shape of every dataset of each file, by name (read_dataset_shape: the headers only, nothing
// loaded); a file named twice is read once, the first file's shape of a name kept.
std::map<std::string, DatasetShape> dataset_shapes(const std::vector<std::string>& paths);

std::map<std::string, const Dataset*> pointers(const std::map<std::string, Dataset>& datasets);

// The non-empty comma-separated items of `list` (option --names a,b); none is Error(kUsage)
// naming `option`.
std::vector<std::string> split_list(const std::string& list, const std::string& option);

// Fails early (before hours of training) if `path` cannot be created.
void check_writable(const std::string& path);

// --precision TEXT: nothing when empty (the config's Training Precision, the environment or the
// device's default then decide: NetworkOptions::precision); a bad value is Error(kUsage) naming
// the option.
std::optional<Precision> precision_option(const std::string& text);
// The help text of --precision, shared by train, predict and evaluate.
extern const char* const kPrecisionHelp;

// --share-gpus of train and predict: its help text.
extern const char* const kShareGpusHelp;

// --device and --share-gpus, checked before any file is read or anything allocated: a device
// that is not cpu, auto, cuda or cuda:N is Error(kUsage) naming --device; under mpirun, a node
// with more ranks than GPUs is refused unless share_gpus (device_for_rank, sparsenet/
// rank_device.h). For one process nothing else changes.
void check_rank_device(const std::string& device, bool share_gpus);

// Under mpirun, each rank says once on stderr which device it took ("sparsenet: rank 1 of 2 on
// GPU 1 (NVIDIA H100 80GB HBM3)"), so that a job's placement can be read from its log; nothing
// for one process, whose device `--device auto` already reports.
void report_rank_device(const std::string& backend_name);
// "<program>: bf16 GEMMs -> <kernel> (<why>)" on stderr when backend_name is the CPU and precision
// bf16 (sparsenet::cpu_bf16_kernel_line), so that every bf16 run says which kernel it measured.
void report_bf16_kernel(const char* program, const std::string& backend_name, Precision precision);

// Applies --threads to OpenMP/OpenBLAS (0 = leave the defaults).
void set_threads(int threads);

// --verbose of train, predict and evaluate: also say which device `--device auto` took when it is
// the CPU of a machine without an NVIDIA GPU (the expected case, otherwise not mentioned; a GPU
// taken, or one present but not usable, is always said: main.cpp).
void set_verbose(bool on);
bool verbose();

}  // namespace sparsenet::cli
