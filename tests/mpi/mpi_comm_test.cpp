// The communicators in a real MPI job: mpirun starts this program on 1, 2 and 3 ranks
// (mpi_comm_test_np1/_np2/_np3, tests/CMakeLists.txt). Every collective of MpiCommunicator on
// the CPU backend, for float, double and uint32 (sum, max, min), with values that differ per rank
// (the maximum and the minimum of an element come from different ranks), roots other than 0,
// straight host buffers and the staged (device) path, and a maximum chunk of 3 elements so that
// the split paths of large counts run on small buffers. Results that every rank holds are
// checked to be bit-identical on every rank.
//
// Every rank makes every collective call before it checks anything (EXPECT, not ASSERT), so a
// failed check on one rank never leaves the others waiting.
#include <gtest/gtest.h>
#include <mpi.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "comm/local_communicator.h"
#include "comm/mpi_communicator.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

template <typename T>
constexpr CommType comm_type() {
    if constexpr (std::is_same_v<T, float>) return CommType::kFloat32;
    if constexpr (std::is_same_v<T, double>) return CommType::kFloat64;
    if constexpr (std::is_same_v<T, uint32_t>) return CommType::kUint32;
    if constexpr (std::is_same_v<T, uint64_t>) return CommType::kUint64;
    return CommType::kByte;
}

// Element i of rank r: different on every rank, the largest and the smallest from different
// ranks as i varies. Floats are exact (multiples of 1/4), so any summation order gives the same
// sum; uint32 values lie above 2^31, so sums over 2 or 3 ranks wrap (modulo 2^32 on both sides).
template <typename T>
T value(int rank, size_t i) {
    const int v = int((size_t(rank) * 7 + i * 3) % 11) - 5 + rank;  // in [-5, 7]
    if constexpr (std::is_floating_point_v<T>) {
        return T(v) + T(0.25) * T(rank);
    } else {
        return T(T(0x80000000u) + T(v + 10));
    }
}

template <typename T>
T reduce(CommOp op, T a, T b) {
    switch (op) {
        case CommOp::kSum:
            return T(a + b);
        case CommOp::kMax:
            return a > b ? a : b;
        case CommOp::kMin:
            return a < b ? a : b;
    }
    return a;
}

// The reduction over ranks 0..size-1 of value(r, i).
template <typename T>
T reduced(CommOp op, int size, size_t i) {
    T acc = value<T>(0, i);
    for (int r = 1; r < size; ++r) acc = reduce(op, acc, value<T>(r, i));
    return acc;
}

const char* op_name(CommOp op) {
    return op == CommOp::kSum ? "sum" : op == CommOp::kMax ? "max" : "min";
}

// Whether `bytes` bytes at `data` are the same on every rank of `comm`.
bool same_on_every_rank(Communicator& comm, const void* data, size_t bytes) {
    std::vector<unsigned char> all(bytes * size_t(comm.size()));
    comm.all_gather(data, all.data(), bytes, CommType::kByte);
    for (int r = 0; r < comm.size(); ++r) {
        if (std::memcmp(all.data() + size_t(r) * bytes, data, bytes) != 0) return false;
    }
    return true;
}

// How a communicator is built for a test: buffers straight to MPI or staged through host
// memory (the path device buffers take), and the largest element count of one MPI call.
struct Variant {
    MpiCommunicator::Staging staging;
    size_t max_chunk;
    std::string name() const {
        return std::string(staging == MpiCommunicator::Staging::kAlways ? "staged" : "direct") +
               ", max chunk " + std::to_string(max_chunk);
    }
};

const Variant kVariants[] = {
    {MpiCommunicator::Staging::kAuto, size_t(INT_MAX)},
    {MpiCommunicator::Staging::kAuto, 3},
    {MpiCommunicator::Staging::kAlways, size_t(INT_MAX)},
    {MpiCommunicator::Staging::kAlways, 3},
};
const size_t kCounts[] = {1, 10, 1000};
const CommOp kOps[] = {CommOp::kSum, CommOp::kMax, CommOp::kMin};

template <typename T>
class MpiCollectives : public ::testing::Test {
  protected:
    std::unique_ptr<Backend> backend_ = make_backend("cpu", 1);

    std::unique_ptr<MpiCommunicator> comm(const Variant& v) {
        auto c = std::make_unique<MpiCommunicator>(*backend_, v.staging);
        c->set_max_chunk(v.max_chunk);
        return c;
    }
};

using Types = ::testing::Types<float, double, uint32_t>;
TYPED_TEST_SUITE(MpiCollectives, Types);

TYPED_TEST(MpiCollectives, AllGatherPutsEveryRanksBlockInRankOrder) {
    using T = TypeParam;
    for (const Variant& v : kVariants) {
        auto comm = this->comm(v);
        const int p = comm->size();
        for (size_t count : kCounts) {
            SCOPED_TRACE(v.name() + ", count " + std::to_string(count));
            std::vector<T> send(count), recv(count * size_t(p), T(0));
            for (size_t i = 0; i < count; ++i) send[i] = value<T>(comm->rank(), i);
            comm->all_gather(send.data(), recv.data(), count, comm_type<T>());
            for (int r = 0; r < p; ++r) {
                for (size_t i = 0; i < count; ++i) {
                    EXPECT_EQ(recv[size_t(r) * count + i], value<T>(r, i)) << "rank " << r;
                }
            }
            EXPECT_TRUE(same_on_every_rank(*comm, recv.data(), recv.size() * sizeof(T)));
        }
    }
}

TYPED_TEST(MpiCollectives, ReduceScatterGivesEachRankItsReducedBlock) {
    using T = TypeParam;
    for (const Variant& v : kVariants) {
        auto comm = this->comm(v);
        const int p = comm->size(), me = comm->rank();
        for (size_t count : kCounts) {
            for (CommOp op : kOps) {
                SCOPED_TRACE(v.name() + ", count " + std::to_string(count) + ", " + op_name(op));
                // Block b of rank r holds value(r, b * count + i).
                std::vector<T> send(count * size_t(p)), recv(count, T(0));
                for (size_t j = 0; j < send.size(); ++j) send[j] = value<T>(me, j);
                comm->reduce_scatter(send.data(), recv.data(), count, comm_type<T>(), op);
                for (size_t i = 0; i < count; ++i) {
                    EXPECT_EQ(recv[i], reduced<T>(op, p, size_t(me) * count + i)) << "i " << i;
                }
            }
        }
    }
}

TYPED_TEST(MpiCollectives, AllReduceGivesEveryRankTheSameReduction) {
    using T = TypeParam;
    for (const Variant& v : kVariants) {
        auto comm = this->comm(v);
        const int p = comm->size();
        for (size_t count : kCounts) {
            for (CommOp op : kOps) {
                SCOPED_TRACE(v.name() + ", count " + std::to_string(count) + ", " + op_name(op));
                std::vector<T> data(count);
                for (size_t i = 0; i < count; ++i) data[i] = value<T>(comm->rank(), i);
                comm->all_reduce(data.data(), count, comm_type<T>(), op);
                for (size_t i = 0; i < count; ++i) EXPECT_EQ(data[i], reduced<T>(op, p, i));
                EXPECT_TRUE(same_on_every_rank(*comm, data.data(), count * sizeof(T)));
            }
        }
    }
}

TYPED_TEST(MpiCollectives, BroadcastCopiesTheRootsData) {
    using T = TypeParam;
    for (const Variant& v : kVariants) {
        auto comm = this->comm(v);
        const int p = comm->size();
        for (int root : {p - 1, 0, p / 2}) {  // p - 1: a root other than 0 when p > 1
            for (size_t count : kCounts) {
                SCOPED_TRACE(v.name() + ", count " + std::to_string(count) + ", root " +
                             std::to_string(root));
                std::vector<T> data(count);
                for (size_t i = 0; i < count; ++i) data[i] = value<T>(comm->rank(), i);
                comm->broadcast(data.data(), count, comm_type<T>(), root);
                for (size_t i = 0; i < count; ++i) EXPECT_EQ(data[i], value<T>(root, i));
                EXPECT_TRUE(same_on_every_rank(*comm, data.data(), count * sizeof(T)));
            }
        }
    }
}

TYPED_TEST(MpiCollectives, GatherFillsTheRootOnly) {
    using T = TypeParam;
    for (const Variant& v : kVariants) {
        auto comm = this->comm(v);
        const int p = comm->size(), me = comm->rank();
        for (int root : {p - 1, 0}) {
            for (size_t count : kCounts) {
                SCOPED_TRACE(v.name() + ", count " + std::to_string(count) + ", root " +
                             std::to_string(root));
                std::vector<T> send(count), recv(count * size_t(p), T(0));
                for (size_t i = 0; i < count; ++i) send[i] = value<T>(me, i);
                // recv is significant on the root only: the others pass none.
                comm->gather(send.data(), me == root ? recv.data() : nullptr, count, comm_type<T>(),
                             root);
                if (me != root) continue;
                for (int r = 0; r < p; ++r) {
                    for (size_t i = 0; i < count; ++i) {
                        EXPECT_EQ(recv[size_t(r) * count + i], value<T>(r, i)) << "rank " << r;
                    }
                }
            }
        }
    }
}

TEST(MpiCommunicator, SixtyFourBitAndByteTypes) {
    auto backend = make_backend("cpu", 1);
    for (const Variant& v : kVariants) {
        SCOPED_TRACE(v.name());
        MpiCommunicator comm(*backend, v.staging);
        comm.set_max_chunk(v.max_chunk);
        const int p = comm.size(), me = comm.rank();
        // uint64 above 2^32: sums and the maximum need all 64 bits.
        std::vector<uint64_t> sum(5), max(5);
        for (size_t i = 0; i < 5; ++i) sum[i] = max[i] = (uint64_t(1) << 40) * uint64_t(me + 1) + i;
        comm.all_reduce(sum.data(), 5, CommType::kUint64, CommOp::kSum);
        comm.all_reduce(max.data(), 5, CommType::kUint64, CommOp::kMax);
        for (size_t i = 0; i < 5; ++i) {
            EXPECT_EQ(sum[i], (uint64_t(1) << 40) * uint64_t(p * (p + 1) / 2) + uint64_t(p) * i);
            EXPECT_EQ(max[i], (uint64_t(1) << 40) * uint64_t(p) + i);
        }
        // Bytes: gathered as they are, and reduced as uint8 (sums wrap modulo 256).
        std::vector<unsigned char> bytes(7), all(7 * size_t(p));
        for (size_t i = 0; i < 7; ++i) bytes[i] = static_cast<unsigned char>(200 + me * 10 + i);
        comm.all_gather(bytes.data(), all.data(), 7, CommType::kByte);
        for (int r = 0; r < p; ++r) {
            for (size_t i = 0; i < 7; ++i) {
                EXPECT_EQ(all[size_t(r) * 7 + i], static_cast<unsigned char>(200 + r * 10 + i));
            }
        }
        comm.all_reduce(bytes.data(), 7, CommType::kByte, CommOp::kSum);
        for (size_t i = 0; i < 7; ++i) {
            unsigned char want = 0;
            for (int r = 0; r < p; ++r) want = static_cast<unsigned char>(want + 200 + r * 10 + i);
            EXPECT_EQ(bytes[i], want);
        }
    }
}

// Sums of inexact floats depend on the order of the additions; every rank must still get the
// same bits (the engine keeps replicated values, e.g. a SoftMax's row sums, in step).
TEST(MpiCommunicator, InexactFloatSumsAreIdenticalOnEveryRank) {
    auto backend = make_backend("cpu", 1);
    MpiCommunicator comm(*backend);
    const size_t count = 100000;  // large enough for the pipelined algorithms
    std::vector<float> data(count);
    std::vector<double> want(count, 0.0);
    for (size_t i = 0; i < count; ++i) {
        data[i] = 0.1f * float(comm.rank() + 1) + 1e-4f * float(i % 977);
        for (int r = 0; r < comm.size(); ++r)
            want[i] += 0.1f * float(r + 1) + 1e-4f * float(i % 977);
    }
    comm.all_reduce(data.data(), count, CommType::kFloat32, CommOp::kSum);
    for (size_t i = 0; i < count; i += 997) EXPECT_NEAR(data[i], want[i], 1e-5 * want[i]);
    EXPECT_TRUE(same_on_every_rank(comm, data.data(), count * sizeof(float)));
}

TEST(MpiCommunicator, RankSizeNameAndBarrier) {
    auto backend = make_backend("cpu", 1);
    MpiCommunicator comm(*backend);
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.size(), size);
    EXPECT_EQ(comm.name(), "mpi");
    comm.barrier();
    // Its own duplicate of MPI_COMM_WORLD: the same group, a different communicator.
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(comm.comm(), MPI_COMM_WORLD, &cmp);
    EXPECT_EQ(cmp, MPI_CONGRUENT);
    // This main initialised MPI: the library uses it and leaves its finalisation to the program.
    EXPECT_FALSE(mpi_initialized_by_library());
    // Zero counts are no-ops on every rank.
    comm.all_gather(nullptr, nullptr, 0, CommType::kFloat32);
    comm.all_reduce(nullptr, 0, CommType::kFloat32, CommOp::kSum);
    comm.broadcast(nullptr, 0, CommType::kFloat32, 0);
}

TEST(MpiCommunicator, MakeCommunicatorUnderMpirun) {
    auto backend = make_backend("cpu", 1);
    const int size = MpiCommunicator(*backend).size();
    // mpirun sets OMPI_COMM_WORLD_SIZE: "auto" is MPI with more than one rank, local with one.
    EXPECT_EQ(launched_with_mpi(), size > 1);
    std::shared_ptr<Communicator> automatic = make_communicator("auto", *backend);
    EXPECT_EQ(automatic->name(), size > 1 ? "mpi" : "local");
    EXPECT_EQ(automatic->size(), size);
    std::shared_ptr<Communicator> mpi = make_communicator("mpi", *backend);
    EXPECT_EQ(mpi->name(), "mpi");
    EXPECT_EQ(mpi->size(), size);
    EXPECT_THROW(make_communicator("nccl", *backend), Error);
}

TEST(MpiCommunicator, ErrorsReturnAndAreThrownAsCommunicationErrors) {
    auto backend = make_backend("cpu", 1);
    MpiCommunicator comm(*backend);
    const int p = comm.size(), me = comm.rank();
    // The duplicate has MPI_ERRORS_RETURN: an invalid call returns an error code (on
    // MPI_COMM_WORLD it would end the job) that mpi_check turns into an Error.
    int x = 0;
    const int rc = MPI_Bcast(&x, 1, MPI_INT, p + 5, comm.comm());
    EXPECT_NE(rc, MPI_SUCCESS);
    try {
        mpi_check(rc, "MPI_Bcast", me, p);
        ADD_FAILURE() << "no error thrown";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kCommunication);
        const std::string want =
            "MPI_Bcast failed on rank " + std::to_string(me) + " of " + std::to_string(p) + ": ";
        EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find("root"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(mpi_check(MPI_SUCCESS, "MPI_Bcast", me, p));
    // Roots out of range are refused before MPI sees them.
    try {
        comm.broadcast(&x, 1, CommType::kUint32, p);
        ADD_FAILURE() << "no error thrown";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_EQ(std::string(e.what()), "broadcast root " + std::to_string(p) +
                                             " out of range for " + std::to_string(p) + " ranks");
    }
    EXPECT_THROW(comm.gather(&x, &x, 1, CommType::kUint32, -1), Error);
    // The communicator still works after the errors.
    uint32_t one = 1;
    comm.all_reduce(&one, 1, CommType::kUint32, CommOp::kSum);
    EXPECT_EQ(one, uint32_t(p));
}

// The local communicator inside an MPI job is still one rank of its own.
TEST(LocalCommunicator, IsOneRankInsideAnMpiJob) {
    auto backend = make_backend("cpu", 1);
    std::shared_ptr<Communicator> local = make_communicator("local", *backend);
    EXPECT_EQ(local->rank(), 0);
    EXPECT_EQ(local->size(), 1);
    std::vector<float> send = {1.5f, -2.0f, 3.25f}, recv(3, 0.0f);
    local->all_gather(send.data(), recv.data(), 3, CommType::kFloat32);
    EXPECT_EQ(recv, send);
    local->all_reduce(send.data(), 3, CommType::kFloat32, CommOp::kSum);
    EXPECT_EQ(send, (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

}  // namespace
}  // namespace sparsenet
