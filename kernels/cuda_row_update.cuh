// The optimizer's update of one element on CUDA, and a touched row's update applied where its
// gradient is summed (sparse_step): shared by optimizer_step_rows (cuda_optimizer.cu) and the
// fused sparse_step (cuda_csr_weight_grad.cu), so that the two give the same bits.
#pragma once

#include "cuda_common.cuh"
#include "formulas/optimizer.h"

namespace sparsenet::cuda {

__device__ __forceinline__ void update_element(const formulas::OptimizerStep& step, int slots,
                                               float* w, float g, float* s1, float* s2) {
    float wv = *w;
    float u1 = slots >= 1 ? *s1 : 0.0f;
    float u2 = slots >= 2 ? *s2 : 0.0f;
    formulas::optimizer_update(step, wv, g, u1, u2);
    *w = wv;
    if (slots >= 1) *s1 = u1;
    if (slots >= 2) *s2 = u2;
}

// RowUpdate (cuda_kernels.h): sparse_step's update of a touched row, element by element, as
// optimizer_rows_kernel does it (catch-up over the row's skipped steps first when it has a clock).

// The steps row `row` skipped (0 without a clock), read by every thread of the block before
// thread 0 moves the clock (row_update_done).
__device__ __forceinline__ uint32_t row_skipped(const RowUpdate& u, uint32_t row) {
    if (u.clock.last == nullptr) return 0u;
    const uint32_t last = u.clock.last[row];
    return last < u.clock.now - 1 ? u.clock.now - 1 - last : 0u;
}

__device__ __forceinline__ void row_update_element(const RowUpdate& u, uint32_t row, size_t c,
                                                   float g, uint32_t skipped,
                                                   const formulas::CatchUp& cu) {
    const size_t off = size_t(row) * u.w.ld + c;
    if (u.clock.last != nullptr) {
        if (skipped > 0) formulas::catch_up_element(cu, u.w.data[off], u.s1[off]);
        update_element(u.step, u.slots, u.w.data + off, g, u.s1 + off,
                       u.slots >= 2 ? u.s2 + off : nullptr);
        return;
    }
    update_element(u.step, u.slots, u.w.data + off, g, u.slots >= 1 ? u.s1 + off : nullptr,
                   u.slots >= 2 ? u.s2 + off : nullptr);
}

// The weight row that touched column i's sums update (grad.rows[i]), its skipped steps and their
// catch-up, read by every thread of the block; ok == false (reported): a row id out of range.
// Inactive: row 0, nothing to catch up.
struct TouchedRow {
    uint32_t row = 0;
    uint32_t skipped = 0;
    formulas::CatchUp cu;
    bool ok = true;
};
__device__ __forceinline__ TouchedRow touched_row(const RowUpdate& u, const SparseRowGrad& grad,
                                                  size_t i, DeviceStatus* status) {
    TouchedRow t;
    if (!u.active) return t;
    t.row = grad.rows[i];
    if (t.row >= u.w.rows) {
        if (threadIdx.x == 0)
            report(status, kStatusRowOutOfRange, Op::kSparseStep, t.row, u.w.rows);
        t.ok = false;
        return t;
    }
    t.skipped = row_skipped(u, t.row);
    if (t.skipped > 0) t.cu = formulas::catch_up_coefficients(u.step, t.skipped);
    return t;
}

// After a __syncthreads that follows every thread's row_skipped: the row is at clock.now.
__device__ __forceinline__ void row_update_done(const RowUpdate& u, uint32_t row) {
    if (u.clock.last != nullptr && threadIdx.x == 0) u.clock.last[row] = u.clock.now;
}

}  // namespace sparsenet::cuda
