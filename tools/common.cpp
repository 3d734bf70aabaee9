#include "common.h"

#include <mpi.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>

#include "sparsenet/device_choice.h"
#include "sparsenet/error.h"
#include "sparsenet/job.h"
#include "sparsenet/rank_device.h"
#include "sparsenet/resources.h"

namespace sparsenet::cli {

std::string host_out_of_memory_message() {
    std::string m =
        "out of host memory: a host allocation failed (std::bad_alloc: reading datasets, "
        "building or loading the network, or staging parameters and results on the host)";
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        m += "; this process's address space is limited to " + format_bytes(limit.rlim_cur) +
             " (ulimit -v)";
    }
    return m + "; " + kOutOfMemoryAdvice;
}

namespace {

// Ends every rank of the job after an error on this one: MPI_Abort when MPI is initialised, so
// the other ranks never wait in a collective for this one (a rank that returned from main would
// leave them waiting); without MPI, a non-zero exit makes mpirun end the others. The CLI's
// decision, not the library's: the library throws and never ends the process.
[[noreturn]] void abort_job(int code) {
    std::fflush(nullptr);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

}  // namespace

int run_command(const std::string& command, const std::function<int()>& body) {
    int code = 0;
    try {
        return body();
    } catch (const Error& e) {
        std::fprintf(stderr, "sparsenet %s: error%s: %s\n", command.c_str(),
                     job_rank_label().c_str(), e.what());
        code = e.category() == ErrorCategory::kUsage ? 2 : 1;
    } catch (const std::bad_alloc&) {
        // A host-side std::vector or new (datasets, host copies of the parameters, model files,
        // op scratch) failed; by now the stack is unwound and its memory freed. Exit code 1, as
        // the backend's out-of-memory Error(kDevice).
        std::fprintf(stderr, "sparsenet %s: error%s: %s\n", command.c_str(),
                     job_rank_label().c_str(), host_out_of_memory_message().c_str());
        code = 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sparsenet %s: internal error%s: %s\n", command.c_str(),
                     job_rank_label().c_str(), e.what());
        code = 3;
    }
    // One rank of an MPI job failed: end them all now rather than leave them in a collective.
    if (launched_with_mpi()) abort_job(code);
    return code;
}

std::map<std::string, Dataset> load_datasets(const std::vector<std::string>& paths,
                                             const NetworkConfig* config, int ranks, int rank) {
    std::map<std::string, Dataset> all;
    std::map<std::string, std::string> origin;
    std::vector<std::string> done;
    for (const std::string& path : paths) {
        bool seen = false;
        for (const std::string& d : done) {
            std::error_code ec;
            if (d == path || std::filesystem::equivalent(d, path, ec)) seen = true;
        }
        if (seen) continue;
        done.push_back(path);
        for (Dataset& d : read_split(path, config, ranks, rank)) {
            auto it = origin.find(d.name);
            if (it != origin.end()) {
                throw Error(ErrorCategory::kData, "dataset '" + d.name + "' is in both " +
                                                      it->second + " and " + path +
                                                      "; dataset names must be unique");
            }
            origin[d.name] = path;
            std::string name = d.name;
            all.emplace(name, std::move(d));
        }
    }
    return all;
}

std::vector<Dataset> read_split(const std::string& path, const NetworkConfig* config, int ranks,
                                int rank) {
    if (config == nullptr || ranks <= 1) return read_datasets(path);
    std::vector<Dataset> all;
    for (const std::string& name : list_datasets(path)) {
        // The width of the layers that read this dataset: their N, or the dataset's for "auto".
        const DatasetShape shape = read_dataset_shape(path, name);
        uint32_t n = 0;
        bool agree = true, used = false;
        for (const LayerConfig& layer : config->layers) {
            if (layer.kind == LayerKind::kHidden || layer.dataset != name) continue;
            const uint32_t width = layer.n_auto ? shape.cols : layer.n;
            agree = agree && (!used || width == n);
            n = width;
            used = true;
        }
        if (!used || !agree) {  // not a layer's, or layers of several widths: all of it
            all.push_back(Dataset::read(path, name));
            continue;
        }
        // The same bands as the engine's (engine::band_of): rank r holds [n r / P, n (r+1) / P).
        const auto first = uint32_t(uint64_t(n) * uint64_t(rank) / uint64_t(ranks));
        const auto last = uint32_t(uint64_t(n) * uint64_t(rank + 1) / uint64_t(ranks));
        all.push_back(Dataset::read_columns(path, name, first, last));
    }
    return all;
}

std::map<std::string, DatasetShape> dataset_shapes(const std::vector<std::string>& paths) {
    std::map<std::string, DatasetShape> shapes;
    std::vector<std::string> done;
    for (const std::string& path : paths) {
        bool seen = false;
        for (const std::string& d : done) {
            std::error_code ec;
            if (d == path || std::filesystem::equivalent(d, path, ec)) seen = true;
        }
        if (seen) continue;
        done.push_back(path);
        for (const std::string& name : list_datasets(path))
            shapes.emplace(name, read_dataset_shape(path, name));
    }
    return shapes;
}

std::map<std::string, const Dataset*> pointers(const std::map<std::string, Dataset>& datasets) {
    std::map<std::string, const Dataset*> p;
    for (const auto& kv : datasets) p[kv.first] = &kv.second;
    return p;
}

void check_writable(const std::string& path) {
    const std::string probe = path + ".probe." + std::to_string(getpid());
    FILE* f = std::fopen(probe.c_str(), "w");
    if (f == nullptr) {
        throw Error(ErrorCategory::kIo, path + ": cannot create the output file here");
    }
    std::fclose(f);
    std::remove(probe.c_str());
}

const char* const kShareGpusHelp =
    "under mpirun, let ranks share GPUs when a node has more ranks than GPUs: node-local rank r "
    "takes GPU r mod the node's GPU count (without it that is refused; docs/parallelism.md)";

void check_rank_device(const std::string& device, bool share_gpus) {
    try {
        (void)gpu_for_rank(device, NodeLocalRank{}, 0, false);  // the spelling only
    } catch (const Error& e) {
        throw Error(e.category(), std::string("option --device: ") + e.what());
    }
    (void)device_for_rank(device, share_gpus);
}

void report_rank_device(const std::string& backend_name) {
    if (!launched_with_mpi()) return;
    std::fprintf(stderr, "sparsenet: rank %d of %d on %s\n", job_rank(), job_size(),
                 describe_device(backend_name).c_str());
}

void report_bf16_kernel(const char* program, const std::string& backend_name, Precision precision) {
    if (backend_name != "cpu" || precision != Precision::kBf16) return;
    std::fprintf(stderr, "%s: %s\n", program, cpu_bf16_kernel_line().c_str());
}

void set_threads(int threads) {
    if (threads > 0) omp_set_num_threads(threads);
}

namespace {
std::atomic<bool> g_verbose{false};
}  // namespace

void set_verbose(bool on) {
    g_verbose.store(on);
}

bool verbose() {
    return g_verbose.load();
}

std::vector<std::string> split_list(const std::string& list, const std::string& option) {
    std::vector<std::string> out;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    if (out.empty()) throw Error(ErrorCategory::kUsage, "option " + option + ": no names");
    return out;
}

const char* const kPrecisionHelp =
    "fp32 | tf32 | bf16: the matrix products' arithmetic; bf16 rounds their operands to BF16 "
    "and sums in FP32, weights stay FP32 (default: the config's Training Precision, else "
    "SPARSENET_CUDA_TF32, else tf32 on a GPU and fp32 on the CPU; docs/gpu.md)";

std::optional<Precision> precision_option(const std::string& text) {
    if (text.empty()) return std::nullopt;
    try {
        return parse_precision(text);
    } catch (const Error& e) {
        throw Error(ErrorCategory::kUsage, std::string("option --precision: ") + e.what());
    }
}

}  // namespace sparsenet::cli
