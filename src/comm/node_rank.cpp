// One GPU per rank under mpirun: the node-local rank (the launcher's variables, else an MPI
// shared-memory split) and the default GPU it gives (comm/node_rank.h). The choice itself is the
// pure gpu_for_rank (src/backend/rank_device.cpp).
#include "comm/node_rank.h"

#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "sparsenet/error.h"

namespace sparsenet {

namespace {

std::mutex g_split_mutex;
std::optional<NodeLocalRank> g_split;  // the MPI split's answer, once per process

std::string lower(const std::string& s) {
    std::string d = s;
    std::transform(d.begin(), d.end(), d.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    return d;
}

// "auto" or "cuda": the devices whose GPU depends on the rank ("cuda:N" names one for all).
bool per_rank(const std::string& device) {
    const std::string d = lower(device);
    return d == "auto" || d == "cuda";
}

}  // namespace

NodeLocalRank mpi_node_local_rank() {
    mpi_ensure_initialized();
    int world_rank = 0, world_size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm node = MPI_COMM_NULL;
    // The processes that can share memory with this one: those of its machine.
    mpi_check(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", world_rank, world_size);
    NodeLocalRank local;
    MPI_Comm_rank(node, &local.rank);
    MPI_Comm_size(node, &local.size);
    MPI_Comm_free(&node);
    local.source = "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)";
    return local;
}

std::optional<NodeLocalRank> node_local_rank() {
    if (auto from_env = node_local_rank_from_environment(std::getenv)) return from_env;
    if (!launched_with_mpi()) return std::nullopt;
    // Collective: kept, so that later calls (the memory check's backend, then the network's)
    // make no MPI call that the other ranks would not make too.
    std::lock_guard<std::mutex> lock(g_split_mutex);
    if (!g_split) g_split = mpi_node_local_rank();
    return g_split;
}

DefaultGpu rank_default_gpu(const std::string& device, bool share_gpus) {
    if (!launched_with_mpi() || !per_rank(device)) return {};
    const int gpus = cuda_device_count();
    if (gpus == 0) return {};  // auto: the CPU; cuda: make_backend says why there is no GPU
    const std::optional<NodeLocalRank> local = node_local_rank();
    if (!local) return {};
    DefaultGpu gpu;
    if (bound_to_one_gpu(std::getenv, gpus)) {
        gpu.index = 0;
        gpu.note = std::string("the one GPU CUDA_VISIBLE_DEVICES=") +
                   std::getenv("CUDA_VISIBLE_DEVICES") + " gives node-local rank " +
                   std::to_string(local->rank) + " of " + std::to_string(local->size);
        return gpu;
    }
    gpu.index = gpu_for_rank(device, *local, gpus, share_gpus);
    gpu.note = "node-local rank " + std::to_string(local->rank) + " of " +
               std::to_string(local->size) + " from " + local->source;
    if (local->size > gpus) {
        gpu.note += ", sharing this node's " + std::to_string(gpus) + " GPU(s) (--share-gpus)";
    }
    return gpu;
}

std::string device_for_rank(const std::string& device, bool share_gpus) {
    // The device's spelling is checked for one process too: a typo fails before any file is
    // read, with make_backend's words.
    (void)gpu_for_rank(device, NodeLocalRank{}, 0, false);
    if (!launched_with_mpi() || !per_rank(device) || cuda_device_count() == 0) return device;
    return "cuda:" + std::to_string(rank_default_gpu(device, share_gpus).index);
}

}  // namespace sparsenet
