// The NCCL communicator's teardown order (src/comm/nccl_teardown.h) with stand-in calls, on the
// CPU: finalise then destroy (NCCL >= 2.14), destroy alone when the library has no
// ncclCommFinalize, abort instead of destroy when finalising fails. The real communicator is
// exercised on a GPU machine only (tests/mpi, NCCL with one rank per GPU).
#include <gtest/gtest.h>

#include <string>

#include "comm/nccl_teardown.h"

namespace sparsenet {
namespace {

std::string g_calls;
int g_finalize_result = 0;

int fake_finalize(int* comm) {
    g_calls += "finalize(" + std::to_string(*comm) + ") ";
    return g_finalize_result;
}
int fake_destroy(int* comm) {
    g_calls += "destroy(" + std::to_string(*comm) + ") ";
    return 0;
}
int fake_abort(int* comm) {
    g_calls += "abort(" + std::to_string(*comm) + ") ";
    return 0;
}

using Fn = int (*)(int*);

TEST(NcclTeardown, FinalisesBeforeDestroying) {
    int comm = 7;
    g_calls.clear();
    g_finalize_result = 0;
    EXPECT_EQ(
        nccl::finalize_and_destroy(&comm, Fn(fake_finalize), Fn(fake_destroy), Fn(fake_abort)), 0);
    EXPECT_EQ(g_calls, "finalize(7) destroy(7) ");
}

TEST(NcclTeardown, WithoutFinalizeInTheLibraryDestroysAlone) {
    int comm = 3;
    g_calls.clear();
    EXPECT_EQ(nccl::finalize_and_destroy(&comm, Fn(nullptr), Fn(fake_destroy), Fn(fake_abort)), 0);
    EXPECT_EQ(g_calls, "destroy(3) ");
}

TEST(NcclTeardown, AFailedFinaliseAbortsInsteadOfDestroying) {
    int comm = 5;
    g_calls.clear();
    g_finalize_result = 3;  // ncclInternalError
    EXPECT_EQ(
        nccl::finalize_and_destroy(&comm, Fn(fake_finalize), Fn(fake_destroy), Fn(fake_abort)), 3);
    EXPECT_EQ(g_calls, "finalize(5) abort(5) ");
    g_finalize_result = 0;
}

}  // namespace
}  // namespace sparsenet
