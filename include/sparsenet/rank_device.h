// One GPU per rank under mpirun (docs/parallelism.md, "One GPU per rank"). Every rank of a job
// reads the same `--device`; without this, "auto" and "cuda" would put every rank on GPU 0. A
// rank takes instead the GPU of its node-local rank (its index among the job's processes on its
// machine), which the launcher says in its environment or an MPI shared-memory split finds.
//
// The choice itself (gpu_for_rank) and the reading of the variables
// (node_local_rank_from_environment) are pure functions, so that every case is tested on a
// machine without a GPU, with the GPU count given.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace sparsenet {

// A process's place among the job's processes on its machine (node).
struct NodeLocalRank {
    int rank = 0;        // 0 .. size - 1
    int size = 1;        // the job's processes on this node
    std::string source;  // where it came from: the variables' names, or the MPI split
};

// getenv, or a test's table: the value of a variable, nullptr when it is not set.
using EnvironmentLookup = std::function<const char*(const char* name)>;

// The node-local rank as the launcher's variables give it, in this order (the first family whose
// rank variable is set wins, so that an MPI launcher's own variables win over Slurm's, which a
// process started by mpirun inside a Slurm job inherits from the batch script):
//   1. Open MPI:            OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
//   2. MPICH / Intel MPI:   MPI_LOCALRANKID, MPI_LOCALNRANKS (the Hydra launcher)
//   3. Slurm (srun):        SLURM_LOCALID; the size from SLURM_NTASKS_PER_NODE, else this node's
//                           entry (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE, else of
//                           SLURM_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of 3 nodes, then 1)
// nullopt when none is set. A family with its rank but no size, a value that is not a
// non-negative integer, or a rank not below the size is Error(kUsage) naming the variables.
std::optional<NodeLocalRank> node_local_rank_from_environment(const EnvironmentLookup& env);

// The GPU index that `device` (as NetworkOptions::device takes it: "auto", "cpu", "cuda",
// "cuda:N", any case) means for a rank with node-local rank `local` on a node with `gpu_count`
// GPUs. -1: no GPU ("cpu", or "auto" on a node without a GPU, which then takes the CPU as it
// always did). "cuda:N": N, the user's choice, on every rank. "auto" and "cuda": local.rank; when
// local.size > gpu_count, local.rank mod gpu_count with share_gpus, else Error(kUsage) naming both
// counts and the flag (nothing is allocated yet). "cuda" with no GPU: 0 (the backend then says
// why there is none). Anything else is Error(kUsage) naming the device.
int gpu_for_rank(const std::string& device, const NodeLocalRank& local, int gpu_count,
                 bool share_gpus);

// Whether a launcher or a wrapper bound this rank to one GPU: CUDA_VISIBLE_DEVICES names exactly
// one device and the rank sees one GPU (Slurm's --gpus-per-task=1 or --gpu-bind, a per-rank
// script). That GPU is the rank's own, whatever the node-local rank and size: counting the node's
// ranks against the one GPU each sees would refuse the job. (Ranks that a user gave the same
// single GPU are not told apart from it: they share it, as `--device cuda:0` would.)
bool bound_to_one_gpu(const EnvironmentLookup& env, int gpu_count);

// This process's node-local rank: the launcher's variables (above); else, when an MPI launcher
// started it with more than one rank (launched_with_mpi) but set none of them, an MPI
// shared-memory split (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), initialising MPI as the
// communicators do; collective: every rank must call it, the first time in the same order, and
// the answer is kept for the process). nullopt for one process (no launcher, or mpirun -np 1).
std::optional<NodeLocalRank> node_local_rank();

// What NetworkOptions `device` and `share_gpus` mean for this process, checked before anything is
// allocated (a program under mpirun calls it first, so that a refusal comes before any file is
// read): the device unchanged for one process, or "cpu"/"cuda:N" (the rank's GPU), or "auto" when
// the node has no GPU. Throws gpu_for_rank's refusal and its Error(kUsage) for an unknown device.
// Touches no GPU memory (it asks the CUDA runtime for the GPU count only).
std::string device_for_rank(const std::string& device, bool share_gpus);

// A backend's name (Network::device(): "cpu", "cuda:1") in words for a rank's line: "the CPU",
// "GPU 1 (NVIDIA H100 80GB HBM3)".
std::string describe_device(const std::string& backend_name);

}  // namespace sparsenet
