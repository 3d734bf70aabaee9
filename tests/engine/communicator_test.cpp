// The communicators without mpirun: make_communicator's choices and refusals,
// launched_with_mpi() under the launchers' environment variables, comm_type_size, the split of
// large MPI transfers into int-sized chunks, the local communicator, and the MPI communicator in
// MPI's singleton mode (one rank; the library initialises MPI and finalises it at exit).
// The collectives across ranks are tested under mpirun: tests/mpi/mpi_comm_test.cpp.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "comm/local_communicator.h"
#include "comm/mpi_communicator.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::ScopedEnv;

const char* const kLauncherVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};

// None of the launchers' variables set, for the scope.
struct NoLauncher {
    ScopedEnv a{kLauncherVariables[0], nullptr};
    ScopedEnv b{kLauncherVariables[1], nullptr};
    ScopedEnv c{kLauncherVariables[2], nullptr};
};

Error error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "no sparsenet::Error thrown";
    return Error(ErrorCategory::kInternal, "");
}

TEST(Communicator, TypeSizes) {
    EXPECT_EQ(comm_type_size(CommType::kFloat32), 4u);
    EXPECT_EQ(comm_type_size(CommType::kFloat64), 8u);
    EXPECT_EQ(comm_type_size(CommType::kUint32), 4u);
    EXPECT_EQ(comm_type_size(CommType::kUint64), 8u);
    EXPECT_EQ(comm_type_size(CommType::kByte), 1u);
}

TEST(Communicator, LaunchedWithMpiReadsTheLaunchersVariables) {
    NoLauncher none;
    EXPECT_FALSE(launched_with_mpi());
    for (const char* name : kLauncherVariables) {
        SCOPED_TRACE(name);
        {
            ScopedEnv set(name, "2");
            EXPECT_TRUE(launched_with_mpi());
        }
        {
            ScopedEnv set(name, "64");
            EXPECT_TRUE(launched_with_mpi());
        }
        // One rank, or a value that is not a count, is not an MPI job of several ranks.
        for (const char* value : {"1", "0", "", "abc", "2x", "-3"}) {
            ScopedEnv set(name, value);
            EXPECT_FALSE(launched_with_mpi()) << "\"" << value << "\"";
        }
    }
    EXPECT_FALSE(launched_with_mpi());  // the scopes restored the environment
}

TEST(Communicator, MakeCommunicatorChoosesAndRefuses) {
    auto backend = make_backend("cpu", 1);
    {
        NoLauncher none;
        std::shared_ptr<Communicator> automatic = make_communicator("auto", *backend);
        EXPECT_EQ(automatic->name(), "local");
        // mpirun -np 1 is one rank: local too.
        ScopedEnv one("OMPI_COMM_WORLD_SIZE", "1");
        EXPECT_EQ(make_communicator("auto", *backend)->name(), "local");
    }
    for (const char* kind : {"local", "Local", "LOCAL"}) {
        std::shared_ptr<Communicator> local = make_communicator(kind, *backend);
        EXPECT_EQ(local->name(), "local");
        EXPECT_EQ(local->rank(), 0);
        EXPECT_EQ(local->size(), 1);
    }

    const Error bogus = error_of([&] { make_communicator("bogus", *backend); });
    EXPECT_EQ(bogus.category(), ErrorCategory::kUsage);
    EXPECT_EQ(std::string(bogus.what()),
              "unknown communicator \"bogus\": expected auto, local, mpi or nccl");

    // NetworkOptions::comm's spellings (the CLI's --comm) name the same kinds, with the same
    // refusal; --parallel's likewise.
    for (CommKind k : {CommKind::kAuto, CommKind::kLocal, CommKind::kMpi, CommKind::kNccl}) {
        EXPECT_EQ(parse_comm_kind(to_string(k)), k);
    }
    EXPECT_EQ(parse_comm_kind("LOCAL"), CommKind::kLocal);
    EXPECT_EQ(parse_comm_kind("Mpi"), CommKind::kMpi);
    EXPECT_EQ(std::string(error_of([] { parse_comm_kind("bogus"); }).what()), bogus.what());
    EXPECT_EQ(parse_parallel_mode("Data"), ParallelMode::kData);
    EXPECT_EQ(parse_parallel_mode("model"), ParallelMode::kModel);
    EXPECT_EQ(to_string(parse_parallel_mode("AUTO")), std::string("auto"));
    const Error mode = error_of([] { parse_parallel_mode("pipeline"); });
    EXPECT_EQ(mode.category(), ErrorCategory::kUsage);
    EXPECT_EQ(std::string(mode.what()),
              "parallel mode 'pipeline' is unknown; expected auto, model or data");

    // NCCL needs the CUDA backend (and a build with NCCL): refused on the CPU backend.
    const Error nccl = error_of([&] { make_communicator("nccl", *backend); });
    EXPECT_EQ(nccl.category(), ErrorCategory::kUsage);
    EXPECT_NE(std::string(nccl.what()).find("\"nccl\""), std::string::npos) << nccl.what();
}

TEST(Communicator, MpiChunksSplitLargeCountsIntoIntSizedCalls) {
    EXPECT_TRUE(mpi_chunks(0).empty());
    EXPECT_TRUE(mpi_chunks(0, 3).empty());

    std::vector<MpiChunk> c = mpi_chunks(10, 3);
    ASSERT_EQ(c.size(), 4u);
    const size_t offsets[] = {0, 3, 6, 9};
    const int counts[] = {3, 3, 3, 1};
    for (size_t i = 0; i < c.size(); ++i) {
        EXPECT_EQ(c[i].offset, offsets[i]);
        EXPECT_EQ(c[i].count, counts[i]);
    }
    c = mpi_chunks(9, 3);
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[2].offset, 6u);
    EXPECT_EQ(c[2].count, 3);
    c = mpi_chunks(7);  // the default: INT_MAX elements per call
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].count, 7);

    // 5e9 bytes (above 2^31 and 2^32): INT_MAX, INT_MAX and the rest, contiguous, covering all.
    const size_t big = 5000000000ull;
    c = mpi_chunks(big);
    ASSERT_EQ(c.size(), 3u);
    size_t next = 0;
    for (const MpiChunk& chunk : c) {
        EXPECT_EQ(chunk.offset, next);
        EXPECT_GT(chunk.count, 0);
        EXPECT_LE(chunk.count, INT_MAX);
        next += size_t(chunk.count);
    }
    EXPECT_EQ(next, big);
    EXPECT_EQ(c[0].count, INT_MAX);
    EXPECT_EQ(c[1].count, INT_MAX);
    EXPECT_EQ(size_t(c[2].count), big - 2 * size_t(INT_MAX));
    // Exactly INT_MAX is one call; one more is two.
    EXPECT_EQ(mpi_chunks(size_t(INT_MAX)).size(), 1u);
    c = mpi_chunks(size_t(INT_MAX) + 1);
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[1].offset, size_t(INT_MAX));
    EXPECT_EQ(c[1].count, 1);

    // The maximum is clamped to [1, INT_MAX].
    EXPECT_EQ(mpi_chunks(3, 0).size(), 3u);
    c = mpi_chunks(big, size_t(1) << 40);
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[0].count, INT_MAX);
}

TEST(LocalCommunicator, CopiesAndLeavesReductionsAlone) {
    auto backend = make_backend("cpu", 1);
    LocalCommunicator local(*backend);
    EXPECT_EQ(local.name(), "local");
    const std::vector<double> send = {1.5, -2.0, 3.25, 1e300};
    std::vector<double> recv(4, 0.0);
    local.all_gather(send.data(), recv.data(), 4, CommType::kFloat64);
    EXPECT_EQ(recv, send);
    std::fill(recv.begin(), recv.end(), 0.0);
    local.reduce_scatter(send.data(), recv.data(), 4, CommType::kFloat64, CommOp::kSum);
    EXPECT_EQ(recv, send);
    std::fill(recv.begin(), recv.end(), 0.0);
    local.gather(send.data(), recv.data(), 4, CommType::kFloat64, 0);
    EXPECT_EQ(recv, send);
    // In place (the same pointer) is allowed and changes nothing.
    local.all_gather(recv.data(), recv.data(), 4, CommType::kFloat64);
    EXPECT_EQ(recv, send);

    std::vector<uint32_t> data = {7, 0xFFFFFFFFu, 3};
    for (CommOp op : {CommOp::kSum, CommOp::kMax, CommOp::kMin}) {
        local.all_reduce(data.data(), 3, CommType::kUint32, op);
    }
    local.broadcast(data.data(), 3, CommType::kUint32, 0);
    local.barrier();
    EXPECT_EQ(data, (std::vector<uint32_t>{7, 0xFFFFFFFFu, 3}));

    const Error root = error_of([&] { local.broadcast(data.data(), 3, CommType::kUint32, 1); });
    EXPECT_EQ(root.category(), ErrorCategory::kUsage);
    EXPECT_EQ(std::string(root.what()),
              "broadcast root 1 out of range: the local communicator has 1 rank");
    EXPECT_THROW(local.gather(send.data(), recv.data(), 4, CommType::kFloat64, -1), Error);
}

// Not started by mpirun: "mpi" is MPI's singleton mode, one rank. The library initialises MPI
// (this process never did) and finalises it at exit.
TEST(MpiCommunicator, SingletonIsOneRank) {
    NoLauncher none;
    auto backend = make_backend("cpu", 1);
    std::shared_ptr<Communicator> comm = make_communicator("mpi", *backend);
    EXPECT_EQ(comm->name(), "mpi");
    EXPECT_EQ(comm->rank(), 0);
    EXPECT_EQ(comm->size(), 1);
    EXPECT_TRUE(mpi_initialized_by_library());
    std::vector<float> send = {1.0f, 2.5f}, recv(2, 0.0f);
    comm->all_gather(send.data(), recv.data(), 2, CommType::kFloat32);
    EXPECT_EQ(recv, send);
    comm->all_reduce(send.data(), 2, CommType::kFloat32, CommOp::kMax);
    EXPECT_EQ(send, (std::vector<float>{1.0f, 2.5f}));
    comm->barrier();
}

// A communicator still alive at exit (held by an object with static storage, built before MPI
// was initialised) is destroyed after the library's MPI_Finalize: it must skip MPI_Comm_free.
std::shared_ptr<Communicator> g_communicator_alive_at_exit;

TEST(MpiCommunicatorDeathTest, ExitWithACommunicatorAliveFinalisesCleanly) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            NoLauncher none;
            static auto backend = make_backend("cpu", 1);
            g_communicator_alive_at_exit = make_communicator("mpi", *backend);
            std::exit(0);
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace sparsenet
