// One GPU per rank: the pure parts (include/sparsenet/rank_device.h): the launchers' variables
// and the choice of a rank's GPU. node_local_rank() and device_for_rank(), which need MPI, are in
// src/comm/node_rank.cpp.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "backend/default_gpu.h"
#include "sparsenet/error.h"
#include "sparsenet/rank_device.h"

#ifdef SPARSENET_WITH_CUDA
#include "backend/cuda/cuda_registry.h"
#endif

namespace sparsenet {

namespace {

// A launcher's value: digits only, so that a typo or an empty value is an error rather than a
// rank 0 that would quietly put every rank on GPU 0.
int parse_count(const char* name, const char* value) {
    const std::string v = value;
    const bool digits =
        !v.empty() && v.size() <= 7 &&
        std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); });
    if (!digits) {
        throw Error(ErrorCategory::kUsage, std::string(name) + "='" + v +
                                               "': expected a non-negative integer (the MPI "
                                               "launcher's node-local rank or rank count)");
    }
    return std::stoi(v);
}

const char* value_of(const EnvironmentLookup& env, const char* name) {
    const char* v = env(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
}

// Slurm's tasks per node, "2(x3),1": 2 tasks on each of 3 nodes, then 1 task on one.
std::vector<int> slurm_tasks_per_node(const char* name, const std::string& text) {
    std::vector<int> tasks;
    size_t at = 0;
    while (at <= text.size()) {
        const size_t comma = std::min(text.find(',', at), text.size());
        const std::string item = text.substr(at, comma - at);
        const size_t paren = item.find("(x");
        int count = 0, repeat = 1;
        if (paren == std::string::npos) {
            count = parse_count(name, item.c_str());
        } else {
            if (item.back() != ')') {
                throw Error(ErrorCategory::kUsage,
                            std::string(name) + "='" + text + "': expected counts such as 2(x3),1");
            }
            count = parse_count(name, item.substr(0, paren).c_str());
            repeat = parse_count(name, item.substr(paren + 2, item.size() - paren - 3).c_str());
        }
        if (repeat > 65536) {
            throw Error(ErrorCategory::kUsage,
                        std::string(name) + "='" + text + "': more nodes than Slurm allows");
        }
        tasks.insert(tasks.end(), size_t(repeat), count);
        at = comma + 1;
    }
    return tasks;
}

NodeLocalRank checked(int rank, int size, std::string source) {
    if (size < 1 || rank >= size) {
        throw Error(ErrorCategory::kUsage,
                    "the MPI launcher says node-local rank " + std::to_string(rank) + " of " +
                        std::to_string(size) + " (" + source +
                        "): the rank must be below the count, which must be at least 1");
    }
    return {rank, size, std::move(source)};
}

}  // namespace

std::optional<NodeLocalRank> node_local_rank_from_environment(const EnvironmentLookup& env) {
    // The MPI libraries' own launchers first: a process that mpirun starts inside a Slurm job
    // inherits the batch script's SLURM_LOCALID (0 for every rank).
    const std::pair<const char*, const char*> families[] = {
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    };
    for (const auto& [rank_name, size_name] : families) {
        const char* rank = value_of(env, rank_name);
        if (rank == nullptr) continue;
        const char* size = value_of(env, size_name);
        if (size == nullptr) {
            throw Error(ErrorCategory::kUsage, std::string(rank_name) + " is set but " + size_name +
                                                   " is not: the MPI launcher's environment is "
                                                   "incomplete");
        }
        return checked(parse_count(rank_name, rank), parse_count(size_name, size),
                       std::string(rank_name) + ", " + size_name);
    }
    const char* slurm_rank = value_of(env, "SLURM_LOCALID");
    if (slurm_rank == nullptr) return std::nullopt;
    const int rank = parse_count("SLURM_LOCALID", slurm_rank);
    if (const char* per_node = value_of(env, "SLURM_NTASKS_PER_NODE")) {
        return checked(rank, parse_count("SLURM_NTASKS_PER_NODE", per_node),
                       "SLURM_LOCALID, SLURM_NTASKS_PER_NODE");
    }
    for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
        const char* text = value_of(env, name);
        if (text == nullptr) continue;
        const std::vector<int> tasks = slurm_tasks_per_node(name, text);
        // This node's entry; without SLURM_NODEID (or one beyond the list) the largest, a bound
        // that refuses a job if any of its nodes has more ranks than GPUs.
        int size = *std::max_element(tasks.begin(), tasks.end());
        if (const char* node = value_of(env, "SLURM_NODEID")) {
            const int id = parse_count("SLURM_NODEID", node);
            if (size_t(id) < tasks.size()) size = tasks[size_t(id)];
        }
        return checked(rank, size, std::string("SLURM_LOCALID, ") + name);
    }
    throw Error(ErrorCategory::kUsage,
                "SLURM_LOCALID is set but none of SLURM_NTASKS_PER_NODE, "
                "SLURM_STEP_TASKS_PER_NODE and SLURM_TASKS_PER_NODE is: Slurm's environment is "
                "incomplete");
}

int gpu_for_rank(const std::string& device, const NodeLocalRank& local, int gpu_count,
                 bool share_gpus) {
    std::string d = device;
    std::transform(d.begin(), d.end(), d.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (d == "cpu") return -1;
    if (d.rfind("cuda:", 0) == 0 && d.size() > 5 && d.size() <= 14 &&
        std::all_of(d.begin() + 5, d.end(), [](unsigned char c) { return std::isdigit(c); })) {
        return std::stoi(d.substr(5));  // the user's choice, the same on every rank
    }
    if (d != "auto" && d != "cuda") {
        throw Error(ErrorCategory::kUsage, "unknown device '" + device +
                                               "': expected cpu, auto, cuda or cuda:N (N a GPU "
                                               "index)");
    }
    if (gpu_count <= 0) return d == "auto" ? -1 : 0;  // auto: the CPU; cuda: the backend says why
    if (local.rank < 0 || local.rank >= local.size) {
        throw Error(ErrorCategory::kInternal, "node-local rank " + std::to_string(local.rank) +
                                                  " of " + std::to_string(local.size) + " (" +
                                                  local.source + ")");
    }
    if (local.size > gpu_count && !share_gpus) {
        const std::string g = std::to_string(gpu_count);
        throw Error(ErrorCategory::kUsage,
                    std::to_string(local.size) + " ranks on this node (" + local.source +
                        ") but it has " + g + (gpu_count == 1 ? " GPU" : " GPUs") +
                        ": one GPU per rank takes at most " + g +
                        " ranks per node. Pass --share-gpus (NetworkOptions::share_gpus) to put "
                        "node-local rank r on GPU r mod " +
                        g + " (NCCL refuses two ranks on one GPU: add --comm mpi), start at most " +
                        g + " ranks per node, or put every rank on one GPU with --device cuda:N");
    }
    return local.rank % gpu_count;
}

bool bound_to_one_gpu(const EnvironmentLookup& env, int gpu_count) {
    if (gpu_count != 1) return false;
    const char* visible = env("CUDA_VISIBLE_DEVICES");
    if (visible == nullptr) return false;
    const std::string v(visible);
    return !v.empty() && v.find(',') == std::string::npos;
}

std::string describe_device(const std::string& backend_name) {
    if (backend_name == "cpu") return "the CPU";
    if (backend_name.rfind("cuda:", 0) != 0) return backend_name;
    const std::string index = backend_name.substr(5);
    std::string name;
#ifdef SPARSENET_WITH_CUDA
    if (!index.empty() && index.size() <= 9 &&
        std::all_of(index.begin(), index.end(), [](unsigned char c) { return std::isdigit(c); })) {
        name = cuda::device_name(std::stoi(index));
    }
#endif
    return "GPU " + index + (name.empty() ? "" : " (" + name + ")");
}

}  // namespace sparsenet
