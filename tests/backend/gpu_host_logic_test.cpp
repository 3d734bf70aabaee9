// How the CUDA backend attributes a launch error (src/backend/cuda/cuda_kernels.h,
// check_launch), on the CPU: cudaGetLastError after a launch also returns the sticky fault of an
// EARLIER kernel, which must not be blamed on the kernel just launched. The message functions are
// pure (the CUDA runtime's error strings need no driver). Also the host-side choices of two
// kernels: csr_matmul's thread mapping by width and csr_weight_grad's plan. The kernels
// themselves are tested by the parity tests (CudaParity.*) and cuda_defects_test on a GPU.
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"

#ifdef SPARSENET_TEST_WITH_CUDA
#include "cuda_kernels.h"

namespace sparsenet {
namespace {

using testing::contains;

TEST(LaunchErrors, ALaunchErrorNamesTheKernelLaunched) {
    EXPECT_FALSE(cuda::is_asynchronous_fault(cudaErrorInvalidConfiguration));
    EXPECT_FALSE(cuda::is_asynchronous_fault(cudaErrorNoKernelImageForDevice));
    const std::string m = cuda::launch_error_message(
        "tile_sum_kernel", cudaErrorInvalidConfiguration, "mark_kernel", false, 0);
    EXPECT_TRUE(contains(m, "launching tile_sum_kernel on cuda:0 failed: ")) << m;
    EXPECT_TRUE(contains(m, "cudaErrorInvalidConfiguration")) << m;
    EXPECT_FALSE(contains(m, "mark_kernel")) << m;
}

TEST(LaunchErrors, AnEarlierFaultIsNotBlamedOnTheNextKernel) {
    for (cudaError_t err : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorAssert,
                            cudaErrorMisalignedAddress}) {
        EXPECT_TRUE(cuda::is_asynchronous_fault(err)) << int(err);
        const std::string m = cuda::launch_error_message("softmax_forward_kernel", err,
                                                         "csr_matmul_kernel", false, 1);
        EXPECT_TRUE(contains(m,
                             "a kernel enqueued before softmax_forward_kernel faulted on "
                             "cuda:1"))
            << m;
        EXPECT_TRUE(contains(m,
                             "the fault happened in csr_matmul_kernel (the last kernel "
                             "launched before) or earlier, not in softmax_forward_kernel"))
            << m;
        EXPECT_TRUE(contains(m, "SPARSENET_CUDA_SYNC_CHECK=1")) << m;
    }
    const std::string first =
        cuda::launch_error_message("fill_kernel", cudaErrorIllegalAddress, nullptr, false, 0);
    EXPECT_TRUE(contains(first, "the fault happened in an earlier kernel")) << first;
}

TEST(LaunchErrors, SyncCheckModeNamesTheFaultingKernel) {
    const std::string m =
        cuda::launch_error_message("output_delta_kernel", cudaErrorIllegalAddress, "gemm", true, 0);
    EXPECT_TRUE(contains(m, "output_delta_kernel faulted on cuda:0: ")) << m;
    EXPECT_TRUE(contains(m, "cudaErrorIllegalAddress")) << m;
    EXPECT_FALSE(contains(m, "enqueued before")) << m;
}

// csr_matmul's thread mapping by output width (kernels/cuda_csr_matmul.cu): above 128 columns the
// 512-column slices; at or below, a group of lanes per row that covers the width with at least
// half of its lanes' columns in use (the slices left all but n of 128 threads idle).
TEST(CsrMatmulMapping, NarrowOutputsUseGroupsThatFitTheWidth) {
    for (size_t n = 1; n <= 4099; ++n) {
        const cuda::CsrMatmulMapping m = cuda::csr_matmul_mapping(n);
        if (n > 128) {
            EXPECT_EQ(m.lanes, 0) << n;
            continue;
        }
        ASSERT_GE(m.lanes, 1) << n;
        EXPECT_LE(m.lanes, 32) << n;
        EXPECT_EQ(m.lanes & (m.lanes - 1), 0) << n;  // a power of two: groups tile a warp
        EXPECT_GE(size_t(m.lanes * m.cols_per_lane), n) << n;
        EXPECT_LT(size_t(m.lanes * m.cols_per_lane), 2 * n) << n;
    }
    EXPECT_EQ(cuda::csr_matmul_mapping(16).lanes, 16);
    EXPECT_EQ(cuda::csr_matmul_mapping(128).cols_per_lane, 4);
}

// csr_matmul's parts (kernels/cuda_csr_matmul.cu): the least power of two that gives 16 blocks
// per SM, at most kMaxCsrMatmulParts; SPARSENET_CSR_MATMUL_PARTS fixes it when it is an integer in
// range (1: the one-pass kernel), else the rule decides.
TEST(CsrMatmulParts, EnoughBlocksForEverySm) {
    // dsstne-bench on an H100: 256 rows x 2 slices of 512 columns, 132 SMs: 2,112 blocks wanted.
    EXPECT_EQ(cuda::csr_matmul_parts(256, 2, 132, nullptr), 8);
    EXPECT_EQ(cuda::csr_matmul_parts(1, 1, 132, nullptr), cuda::kMaxCsrMatmulParts);
    EXPECT_EQ(cuda::csr_matmul_parts(4096, 2, 132, nullptr), 1);
    for (size_t rows : {1, 7, 64, 256, 300, 1000, 5000})
        for (size_t slices : {1, 2, 3})
            for (int sms : {1, 108, 132}) {
                const int p = cuda::csr_matmul_parts(rows, slices, sms, nullptr);
                ASSERT_GE(p, 1);
                ASSERT_LE(p, cuda::kMaxCsrMatmulParts);
                EXPECT_EQ(p & (p - 1), 0);
                const size_t want = 16 * size_t(sms);
                if (p < cuda::kMaxCsrMatmulParts) {
                    EXPECT_GE(rows * slices * p, want);
                }
                if (p > 1) {
                    EXPECT_LT(rows * slices * (p / 2), want);
                }
            }
    EXPECT_EQ(cuda::csr_matmul_parts(256, 2, 132, "1"), 1);
    EXPECT_EQ(cuda::csr_matmul_parts(256, 2, 132, "3"), 3);
    EXPECT_EQ(cuda::csr_matmul_parts(256, 2, 132, "0"), 8);
    EXPECT_EQ(cuda::csr_matmul_parts(256, 2, 132, "17"), 8);
    EXPECT_EQ(cuda::csr_matmul_parts(256, 2, 132, "2x"), 8);
    EXPECT_EQ(cuda::csr_matmul_parts(256, 2, 132, ""), 8);
}

// csr_weight_grad's plan (kernels/cuda_csr_weight_grad.cu): for a 10M-item input the work of a
// call follows the batch's entries (the gradient capacity the engine sizes from them), not the
// input width; the dense flags over [in] remain only where in <= capacity.
TEST(WeightGradPlan, WideInputsCostTheBatchNotTheWidth) {
    const size_t in = 10'000'000, batch = 1024, capacity = 60'000;
    const cuda::WeightGradPlan wide = cuda::weight_grad_plan(batch, in, capacity);
    EXPECT_TRUE(wide.sorted);
    EXPECT_EQ(wide.pairs, capacity);
    EXPECT_EQ(wide.work, batch + capacity);
    EXPECT_LT(wide.work * 100, in);
    // Narrow input (the batch stores at least `in` entries): dense flags, tiles of rows.
    const cuda::WeightGradPlan narrow = cuda::weight_grad_plan(batch, 500, 500);
    EXPECT_FALSE(narrow.sorted);
    EXPECT_EQ(narrow.tile_rows, 1024u);
    EXPECT_EQ(narrow.pairs, 1024u * 500);
    EXPECT_LE(narrow.work, 500 + narrow.pairs);
    EXPECT_EQ(cuda::weight_grad_plan(0, in, capacity).work, 0u);
}

}  // namespace
}  // namespace sparsenet
#else
TEST(LaunchErrors, NeedsACudaBuild) {
    GTEST_SKIP() << "this build has no CUDA backend";
}
#endif
