// Each rank's GPU in a real MPI job (mpi_node_rank_test_np1/_np2/_np3, tests/CMakeLists.txt): the
// MPI shared-memory split finds the node-local rank that Open MPI's variables say, and is taken
// when the launcher sets none of the variables; the choice of a rank's GPU from it, for given
// GPU counts, on every rank (the refusal on every rank of a node with too few GPUs, the
// --share-gpus modulo). The choice's every case without MPI: tests/backend/rank_device_test.cpp.
//
// Every rank makes the same collective calls before it checks anything (EXPECT, not ASSERT,
// until the last collective), so a failed check on one rank never leaves the others waiting.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "comm/node_rank.h"
#include "sparsenet/error.h"
#include "sparsenet/rank_device.h"
#include "support/split_networks.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using mpi_testing::world_rank;
using mpi_testing::world_size;

TEST(MpiNodeRank, TheSplitAgreesWithOpenMpisVariables) {
    const NodeLocalRank split = mpi_node_local_rank();
    EXPECT_EQ(split.source, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    // Every rank of these tests runs on this machine, in world order.
    EXPECT_EQ(split.size, world_size());
    EXPECT_EQ(split.rank, world_rank());
    const std::optional<NodeLocalRank> env = node_local_rank_from_environment(std::getenv);
    ASSERT_TRUE(env.has_value()) << "mpirun set no OMPI_COMM_WORLD_LOCAL_RANK";
    EXPECT_EQ(env->rank, split.rank);
    EXPECT_EQ(env->size, split.size);
}

TEST(MpiNodeRank, WithoutTheLaunchersVariablesTheSplitIsTaken) {
    const testing::ScopedEnv a("OMPI_COMM_WORLD_LOCAL_RANK", nullptr),
        b("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr), c("MPI_LOCALRANKID", nullptr),
        d("MPI_LOCALNRANKS", nullptr), e("SLURM_LOCALID", nullptr);
    const std::optional<NodeLocalRank> local = node_local_rank();
    if (world_size() == 1) {
        // mpirun -np 1 is one process: nothing to choose, GPU 0 as without mpirun.
        EXPECT_FALSE(local.has_value());
        return;
    }
    ASSERT_TRUE(local.has_value());
    EXPECT_EQ(local->source, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    EXPECT_EQ(local->rank, world_rank());
    EXPECT_EQ(local->size, world_size());
    // Kept: a second call makes no collective (the other ranks would not make it).
    EXPECT_EQ(node_local_rank()->rank, local->rank);

    // As many GPUs as ranks: each its own.
    EXPECT_EQ(gpu_for_rank("auto", *local, world_size(), false), world_rank());
    EXPECT_EQ(gpu_for_rank("cuda", *local, world_size() + 1, false), world_rank());
    // One GPU: refused on every rank, naming both counts, unless shared.
    try {
        (void)gpu_for_rank("auto", *local, 1, false);
        ADD_FAILURE() << "not refused";
    } catch (const Error& err) {
        const std::string m = err.what();
        EXPECT_NE(m.find(std::to_string(world_size()) +
                         " ranks on this node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)) but it "
                         "has 1 GPU"),
                  std::string::npos)
            << m;
        EXPECT_NE(m.find("--share-gpus"), std::string::npos) << m;
    }
    EXPECT_EQ(gpu_for_rank("auto", *local, 1, true), 0);
    EXPECT_EQ(gpu_for_rank("auto", *local, 2, true), world_rank() % 2);
}

}  // namespace
}  // namespace sparsenet
