// Optimizer updates on CUDA: optimizer_step (dense) and optimizer_step_rows (row-sparse gradient,
// SparseUpdate::kExact or kLazy).
//
// Contracts (src/backend/backend.h) and CPU reference (cpu::optimizer_step,
// cpu::optimizer_step_rows in cpu_ops_dense.h): formulas::optimizer_update on every element (SGD,
// Momentum, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam, AdamW); w: [rows, cols] (ld); the state
// slots share w's layout and ld and are touched only when the kind uses them
// (formulas::optimizer_state_slots). Row-sparse form: gradient = grad.values at grad.rows, zero
// elsewhere.
//  * kExact: the dense update with that zero-filled gradient. When formulas::zero_gradient_is_noop
//    (SGD or AdaGrad without L1/L2) only the touched rows are visited; otherwise every row is
//    updated, finding its gradient row through a row -> compact index map rebuilt per call in
//    scratch (memset to "none", then one store per touched row).
//  * kLazy: only the touched rows and their state are updated.
//
// Thread mapping: one thread per element (elementwise_shape) for dense passes; one block of 256
// threads per touched row (grid-striding over *grad.count, read on the device) for the
// touched-rows pass. Every element is updated by exactly one thread with the shared formula:
// bit-identical on every run; against the CPU, within 1e-5 relative per step (FMA contraction and
// the device sqrt/division are the only differences). Row ids >= rows and *count > capacity are
// reported (Error(kInternal) at the next synchronisation).
#include "cuda_common.cuh"
#include "formulas/optimizer.h"

namespace sparsenet::cuda {

namespace {

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

__global__ void optimizer_dense_kernel(formulas::OptimizerStep step, int slots, MatrixView w,
                                       ConstMatrixView g, float* s1, float* s2) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= w.cols) return;
    SN_ROWS_LOOP(r, w.rows) {
        const size_t off = r * w.ld + c;
        update_element(step, slots, w.data + off, g.data[r * g.ld + c],
                       slots >= 1 ? s1 + off : nullptr, slots >= 2 ? s2 + off : nullptr);
    }
}

// Touched rows only: row grad.rows[i] with gradient row i, for i < min(*count, capacity).
__global__ void optimizer_rows_kernel(formulas::OptimizerStep step, int slots, MatrixView w,
                                      SparseRowGrad grad, float* s1, float* s2,
                                      DeviceStatus* status) {
    const uint32_t stored = *grad.count;
    if (stored > grad.capacity && blockIdx.x == 0 && threadIdx.x == 0)
        report(status, kStatusCountOverCapacity, Op::kOptimizerStepRows, stored, grad.capacity);
    const size_t count = stored < grad.capacity ? stored : grad.capacity;
    const size_t n = w.cols;
    for (size_t i = blockIdx.x; i < count; i += gridDim.x) {
        const uint32_t row = grad.rows[i];
        if (row >= w.rows) {
            if (threadIdx.x == 0)
                report(status, kStatusRowOutOfRange, Op::kOptimizerStepRows, row, w.rows);
            continue;
        }
        const size_t base = size_t(row) * w.ld;
        const float* g = grad.values + i * n;
        for (size_t c = threadIdx.x; c < n; c += blockDim.x) {
            const size_t off = base + c;
            update_element(step, slots, w.data + off, g[c], slots >= 1 ? s1 + off : nullptr,
                           slots >= 2 ? s2 + off : nullptr);
        }
    }
}

__global__ void build_row_map_kernel(SparseRowGrad grad, size_t rows, uint32_t* map,
                                     DeviceStatus* status) {
    const uint32_t stored = *grad.count;
    if (stored > grad.capacity && blockIdx.x == 0 && threadIdx.x == 0)
        report(status, kStatusCountOverCapacity, Op::kOptimizerStepRows, stored, grad.capacity);
    const size_t count = stored < grad.capacity ? stored : grad.capacity;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += size_t(gridDim.x) * blockDim.x) {
        const uint32_t row = grad.rows[i];
        if (row >= rows) {
            report(status, kStatusRowOutOfRange, Op::kOptimizerStepRows, row, rows);
            continue;
        }
        map[row] = uint32_t(i);
    }
}

// Every row; untouched rows see a zero gradient.
__global__ void optimizer_mapped_kernel(formulas::OptimizerStep step, int slots, MatrixView w,
                                        const float* values, const uint32_t* map, float* s1,
                                        float* s2) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= w.cols) return;
    SN_ROWS_LOOP(r, w.rows) {
        const uint32_t i = map[r];
        const float g = i == kNone ? 0.0f : values[size_t(i) * w.cols + c];
        const size_t off = r * w.ld + c;
        update_element(step, slots, w.data + off, g, slots >= 1 ? s1 + off : nullptr,
                       slots >= 2 ? s2 + off : nullptr);
    }
}

}  // namespace

void launch_optimizer_step(const Context& ctx, const formulas::OptimizerStep& step, MatrixView w,
                           ConstMatrixView g, float* state1, float* state2) {
    if (w.rows == 0 || w.cols == 0) return;
    const int slots = formulas::optimizer_state_slots(step.kind);
    const Shape2d s = elementwise_shape(w.rows, w.cols);
    optimizer_dense_kernel<<<s.grid, s.block, 0, ctx.stream>>>(step, slots, w, g, state1, state2);
    check_launch(ctx, "optimizer_dense_kernel");
}

void launch_optimizer_step_rows(const Context& ctx, const formulas::OptimizerStep& step,
                                MatrixView w, const SparseRowGrad& grad, float* state1,
                                float* state2, SparseUpdate mode, ScratchBuffer& row_map) {
    if (w.rows == 0 || w.cols == 0) return;
    const int slots = formulas::optimizer_state_slots(step.kind);
    if (mode == SparseUpdate::kLazy || formulas::zero_gradient_is_noop(step)) {
        if (grad.capacity == 0) return;
        const size_t blocks = std::min<size_t>(grad.capacity, size_t(ctx.sm_count) * 16);
        optimizer_rows_kernel<<<unsigned(blocks), 256, 0, ctx.stream>>>(step, slots, w, grad,
                                                                        state1, state2, ctx.status);
        check_launch(ctx, "optimizer_rows_kernel");
        return;
    }
    uint32_t* map = row_map.get_as<uint32_t>(ctx, w.rows, "optimizer_step_rows row map");
    check_cuda(cudaMemsetAsync(map, 0xff, w.rows * sizeof(uint32_t), ctx.stream), "cudaMemsetAsync",
               "clearing the optimizer_step_rows row map");
    if (grad.capacity > 0) {
        const size_t blocks =
            std::min<size_t>((grad.capacity + 255) / 256, size_t(ctx.sm_count) * 16);
        build_row_map_kernel<<<unsigned(blocks), 256, 0, ctx.stream>>>(grad, w.rows, map,
                                                                       ctx.status);
        check_launch(ctx, "build_row_map_kernel");
    }
    const Shape2d s = elementwise_shape(w.rows, w.cols);
    optimizer_mapped_kernel<<<s.grid, s.block, 0, ctx.stream>>>(step, slots, w, grad.values, map,
                                                                state1, state2);
    check_launch(ctx, "optimizer_mapped_kernel");
}

}  // namespace sparsenet::cuda
