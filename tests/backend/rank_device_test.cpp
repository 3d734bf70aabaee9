// One GPU per rank under mpirun (include/sparsenet/rank_device.h), on the CPU: the node-local
// rank from each launcher's variables and their precedence, the choice of a rank's GPU for a
// given GPU count (the refusal of more ranks than GPUs, --share-gpus's modulo, an explicit
// cuda:N), and one process without a launcher left exactly as before. The MPI shared-memory
// split runs under mpirun: tests/mpi/mpi_node_rank_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "backend/default_gpu.h"
#include "comm/node_rank.h"
#include "sparsenet/error.h"
#include "sparsenet/rank_device.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::ScopedEnv;

// A launcher's environment as a table.
EnvironmentLookup env_of(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    };
}

Error error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "no error thrown";
    return Error(ErrorCategory::kInternal, "none");
}

NodeLocalRank local(int rank, int size) {
    return {rank, size, "TEST_LOCAL_RANK, TEST_LOCAL_SIZE"};
}

// ---- the launchers' variables ----

TEST(NodeLocalRankFromEnvironment, NoneSetIsNoLauncher) {
    EXPECT_FALSE(node_local_rank_from_environment(env_of({})).has_value());
    // Empty values count as unset (a wrapper script's `export VAR=`).
    EXPECT_FALSE(node_local_rank_from_environment(
                     env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", ""}, {"SLURM_LOCALID", ""}}))
                     .has_value());
}

TEST(NodeLocalRankFromEnvironment, OpenMpi) {
    const auto r = node_local_rank_from_environment(
        env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->rank, 3);
    EXPECT_EQ(r->size, 4);
    EXPECT_EQ(r->source, "OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST(NodeLocalRankFromEnvironment, MpichHydra) {
    const auto r = node_local_rank_from_environment(
        env_of({{"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}}));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->rank, 1);
    EXPECT_EQ(r->size, 2);
    EXPECT_EQ(r->source, "MPI_LOCALRANKID, MPI_LOCALNRANKS");
}

TEST(NodeLocalRankFromEnvironment, SlurmTasksPerNodeGiven) {
    const auto r = node_local_rank_from_environment(
        env_of({{"SLURM_LOCALID", "5"}, {"SLURM_NTASKS_PER_NODE", "8"}}));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->rank, 5);
    EXPECT_EQ(r->size, 8);
    EXPECT_EQ(r->source, "SLURM_LOCALID, SLURM_NTASKS_PER_NODE");
}

TEST(NodeLocalRankFromEnvironment, SlurmStepTasksPerNodeByNodeId) {
    // "2(x3),1": nodes 0, 1, 2 run 2 tasks each, node 3 runs 1.
    const std::map<std::string, std::string> base = {{"SLURM_LOCALID", "0"},
                                                     {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}};
    for (const auto& [node, size] : {std::pair<const char*, int>{"0", 2}, {"2", 2}, {"3", 1}}) {
        auto vars = base;
        vars["SLURM_NODEID"] = node;
        const auto r = node_local_rank_from_environment(env_of(vars));
        ASSERT_TRUE(r.has_value()) << node;
        EXPECT_EQ(r->size, size) << "node " << node;
        EXPECT_EQ(r->source, "SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE");
    }
    // Without SLURM_NODEID: the largest entry, so that every rank of a job with one crowded
    // node gives the same answer.
    const auto r = node_local_rank_from_environment(env_of(base));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->size, 2);
    // The job's SLURM_TASKS_PER_NODE when the step's is missing.
    const auto job = node_local_rank_from_environment(
        env_of({{"SLURM_LOCALID", "3"}, {"SLURM_TASKS_PER_NODE", "4"}}));
    ASSERT_TRUE(job.has_value());
    EXPECT_EQ(job->size, 4);
    EXPECT_EQ(job->source, "SLURM_LOCALID, SLURM_TASKS_PER_NODE");
}

TEST(NodeLocalRankFromEnvironment, PrecedenceOpenMpiThenMpichThenSlurm) {
    // mpirun inside a Slurm job: its ranks inherit the batch script's SLURM_LOCALID (0 for all);
    // the MPI launcher's own variables win.
    std::map<std::string, std::string> vars = {{"SLURM_LOCALID", "0"},
                                               {"SLURM_NTASKS_PER_NODE", "1"},
                                               {"MPI_LOCALRANKID", "2"},
                                               {"MPI_LOCALNRANKS", "3"},
                                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
    auto r = node_local_rank_from_environment(env_of(vars));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->rank, 1);
    EXPECT_EQ(r->size, 4);
    vars.erase("OMPI_COMM_WORLD_LOCAL_RANK");
    vars.erase("OMPI_COMM_WORLD_LOCAL_SIZE");
    r = node_local_rank_from_environment(env_of(vars));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->rank, 2);
    EXPECT_EQ(r->size, 3);
    vars.erase("MPI_LOCALRANKID");
    vars.erase("MPI_LOCALNRANKS");
    r = node_local_rank_from_environment(env_of(vars));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->rank, 0);
    EXPECT_EQ(r->size, 1);
}

TEST(NodeLocalRankFromEnvironment, BrokenValuesAreErrorsNamingTheVariables) {
    struct Case {
        std::map<std::string, std::string> vars;
        std::string expected;
    };
    const Case cases[] = {
        {{{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
         "OMPI_COMM_WORLD_LOCAL_RANK is set but OMPI_COMM_WORLD_LOCAL_SIZE is not"},
        {{{"MPI_LOCALRANKID", "x"}, {"MPI_LOCALNRANKS", "2"}}, "MPI_LOCALRANKID='x'"},
        {{{"OMPI_COMM_WORLD_LOCAL_RANK", "-1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
         "OMPI_COMM_WORLD_LOCAL_RANK='-1': expected a non-negative integer"},
        {{{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
         "node-local rank 2 of 2 (OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE)"},
        {{{"SLURM_LOCALID", "0"}}, "SLURM_LOCALID is set but none of SLURM_NTASKS_PER_NODE"},
        {{{"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x3"}},
         "SLURM_STEP_TASKS_PER_NODE='2(x3': expected counts such as 2(x3),1"},
    };
    for (const Case& c : cases) {
        const Error e = error_of([&] { (void)node_local_rank_from_environment(env_of(c.vars)); });
        EXPECT_EQ(e.category(), ErrorCategory::kUsage) << e.what();
        EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
    }
}

// ---- the choice of a rank's GPU ----

TEST(GpuForRank, EachRankTakesItsNodeLocalRanksGpu) {
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(gpu_for_rank("auto", local(r, 4), 4, false), r);
        EXPECT_EQ(gpu_for_rank("cuda", local(r, 4), 8, false), r);
        EXPECT_EQ(gpu_for_rank("CUDA", local(r, 4), 4, true), r);  // sharing changes nothing here
    }
}

TEST(GpuForRank, MoreRanksThanGpusIsRefusedNamingBothCountsAndTheFlag) {
    for (const char* device : {"auto", "cuda"}) {
        for (int r = 0; r < 3; ++r) {  // every rank refuses, the ones that would fit too
            const Error e = error_of([&] { (void)gpu_for_rank(device, local(r, 3), 2, false); });
            EXPECT_EQ(e.category(), ErrorCategory::kUsage);
            const std::string m = e.what();
            EXPECT_NE(m.find("3 ranks on this node (TEST_LOCAL_RANK, TEST_LOCAL_SIZE) but it has "
                             "2 GPUs"),
                      std::string::npos)
                << m;
            EXPECT_NE(m.find("--share-gpus"), std::string::npos) << m;
            EXPECT_NE(m.find("GPU r mod 2"), std::string::npos) << m;
            EXPECT_NE(m.find("--device cuda:N"), std::string::npos) << m;
        }
    }
    const Error one = error_of([] { (void)gpu_for_rank("auto", local(0, 2), 1, false); });
    EXPECT_NE(std::string(one.what())
                  .find("2 ranks on this node (TEST_LOCAL_RANK, "
                        "TEST_LOCAL_SIZE) but it has 1 GPU:"),
              std::string::npos)
        << one.what();
}

TEST(GpuForRank, ShareGpusTakesTheRankModuloTheGpuCount) {
    const int expected[] = {0, 1, 0, 1, 0};
    for (int r = 0; r < 5; ++r) {
        EXPECT_EQ(gpu_for_rank("auto", local(r, 5), 2, true), expected[r]) << r;
        EXPECT_EQ(gpu_for_rank("cuda", local(r, 5), 2, true), expected[r]) << r;
        EXPECT_EQ(gpu_for_rank("auto", local(r, 5), 1, true), 0) << r;
    }
}

TEST(GpuForRank, AnExplicitDeviceWinsOnEveryRank) {
    // cuda:N is the user's choice: the same GPU on every rank, whatever the counts (the backend
    // says when there is no GPU N); cpu is the CPU.
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(gpu_for_rank("cuda:1", local(r, 4), 2, false), 1);
        EXPECT_EQ(gpu_for_rank("cuda:0", local(r, 4), 1, false), 0);
        EXPECT_EQ(gpu_for_rank("cuda:7", local(r, 4), 0, false), 7);
        EXPECT_EQ(gpu_for_rank("cpu", local(r, 4), 1, false), -1);
        EXPECT_EQ(gpu_for_rank("CPU", local(r, 4), 0, true), -1);
    }
}

TEST(GpuForRank, ANodeWithoutGpus) {
    // auto: the CPU, as it always did; cuda: GPU 0, whose absence the backend then explains.
    EXPECT_EQ(gpu_for_rank("auto", local(2, 3), 0, false), -1);
    EXPECT_EQ(gpu_for_rank("cuda", local(2, 3), 0, false), 0);
}

TEST(GpuForRank, UnknownDevicesAreRefused) {
    for (const char* device : {"gpu", "cuda:", "cuda:x", "cuda:-1", "", "auto:1"}) {
        const Error e = error_of([&] { (void)gpu_for_rank(device, local(0, 1), 1, false); });
        EXPECT_EQ(e.category(), ErrorCategory::kUsage) << device;
        EXPECT_NE(std::string(e.what()).find("unknown device '" + std::string(device) +
                                             "': expected cpu, auto, cuda or cuda:N"),
                  std::string::npos)
            << e.what();
    }
}

// ---- one process: nothing changes ----

TEST(RankDevice, OneProcessKeepsGpuZeroAndTheDeviceAsGiven) {
    // No launcher with more than one rank (a stray local-rank variable, mpirun -np 1): the
    // default GPU is 0 with no note, and every device is passed on unchanged.
    ScopedEnv a("OMPI_COMM_WORLD_SIZE", "1"), b("PMI_SIZE", nullptr), c("PMIX_SIZE", nullptr);
    ScopedEnv d("OMPI_COMM_WORLD_LOCAL_RANK", "3"), e("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    for (const char* device : {"auto", "cuda", "cpu", "cuda:1", "Auto"}) {
        const DefaultGpu gpu = rank_default_gpu(device, false);
        EXPECT_EQ(gpu.index, 0) << device;
        EXPECT_EQ(gpu.note, "") << device;
        EXPECT_EQ(device_for_rank(device, false), device);
        EXPECT_EQ(device_for_rank(device, true), device);
    }
    // A misspelt device fails here, before anything is read or allocated, with make_backend's
    // words.
    const Error err = error_of([] { (void)device_for_rank("gpu", false); });
    EXPECT_EQ(err.category(), ErrorCategory::kUsage);
    EXPECT_NE(std::string(err.what()).find("unknown device 'gpu'"), std::string::npos);
    // The node-local rank is read from the variables alone (no MPI), whatever the launcher.
    const std::optional<NodeLocalRank> from_env = node_local_rank();
    ASSERT_TRUE(from_env.has_value());
    EXPECT_EQ(from_env->rank, 3);
    EXPECT_EQ(from_env->size, 4);
}

TEST(RankDevice, UnderALauncherANodeWithoutGpusKeepsTheCpu) {
    // mpirun -np 4 on a machine without a GPU: "auto" still takes the CPU and "cuda" still fails
    // in the backend with the runtime's reason; no MPI split is made.
    if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
    ScopedEnv a("OMPI_COMM_WORLD_SIZE", "4");
    ScopedEnv d("OMPI_COMM_WORLD_LOCAL_RANK", "3"), e("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    EXPECT_EQ(device_for_rank("auto", false), "auto");
    EXPECT_EQ(device_for_rank("cuda", false), "cuda");
    EXPECT_EQ(rank_default_gpu("auto", false).index, 0);
    const std::unique_ptr<Backend> backend =
        make_backend("auto", 1, rank_default_gpu("auto", false));
    EXPECT_EQ(backend->name(), "cpu");
}

TEST(RankDevice, DescribeDevice) {
    EXPECT_EQ(describe_device("cpu"), "the CPU");
    // Without a GPU the driver has no name for it: the index alone.
    if (cuda_device_count() == 0) {
        EXPECT_EQ(describe_device("cuda:3"), "GPU 3");
    }
    EXPECT_EQ(describe_device("cuda:0").rfind("GPU 0", 0), 0u);
}

// A rank that its launcher bound to one GPU (CUDA_VISIBLE_DEVICES names one, the rank sees one)
// takes it; a list, an empty value, no variable or several visible GPUs leave the node-local rule.
TEST(BoundToOneGpu, OneVisibleDeviceIsTheRanksOwn) {
    EXPECT_TRUE(bound_to_one_gpu(env_of({{"CUDA_VISIBLE_DEVICES", "3"}}), 1));
    EXPECT_TRUE(bound_to_one_gpu(env_of({{"CUDA_VISIBLE_DEVICES", "GPU-0c2671da"}}), 1));
    EXPECT_FALSE(bound_to_one_gpu(env_of({{"CUDA_VISIBLE_DEVICES", "2,3"}}), 1));
    EXPECT_FALSE(bound_to_one_gpu(env_of({{"CUDA_VISIBLE_DEVICES", ""}}), 1));
    EXPECT_FALSE(bound_to_one_gpu(env_of({}), 1));
    EXPECT_FALSE(bound_to_one_gpu(env_of({{"CUDA_VISIBLE_DEVICES", "3"}}), 2));
    EXPECT_FALSE(bound_to_one_gpu(env_of({{"CUDA_VISIBLE_DEVICES", "3"}}), 0));
}

}  // namespace
}  // namespace sparsenet
