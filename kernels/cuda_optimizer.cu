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
//  * kExact with a row clock (Momentum, Nesterov: formulas::catch_up_exact): the touched rows
//    only, each caught up over its skipped steps in closed form first; launch_catch_up_rows
//    brings the rows a batch reads (or every row) up to a step.
//
// Thread mapping: one thread per element (elementwise_shape) for dense passes; one block of 256
// threads per touched row (grid-striding over *grad.count, read on the device) for the
// touched-rows pass. Every element is updated by exactly one thread with the shared formula:
// bit-identical on every run; against the CPU, within 1e-5 relative per step (FMA contraction and
// the device sqrt/division are the only differences). Row ids >= rows and *count > capacity are
// reported (Error(kInternal) at the next synchronisation).
#include "cuda_common.cuh"
#include "cuda_row_update.cuh"
#include "formulas/optimizer.h"
#include "formulas/precision.h"

namespace sparsenet::cuda {

namespace {

// w16 (nullable): the BF16 copy of the weights (Precision::kBf16), written from the updated value
// in the same pass, so that the copy costs 2 bytes per weight written and no pass of its own.
__global__ void optimizer_dense_kernel(formulas::OptimizerStep step, int slots, MatrixView w,
                                       ConstMatrixView g, float* s1, float* s2, uint16_t* w16) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= w.cols) return;
    SN_ROWS_LOOP(r, w.rows) {
        const size_t off = r * w.ld + c;
        update_element(step, slots, w.data + off, g.data[r * g.ld + c],
                       slots >= 1 ? s1 + off : nullptr, slots >= 2 ? s2 + off : nullptr);
        if (w16 != nullptr) w16[off] = formulas::bf16_bits(w.data[off]);
    }
}

// Touched rows only: row grad.rows[i] with gradient row i, for i < min(*count, capacity).
// clock.last != nullptr: each row first caught up to step clock.now - 1, its clock then set to
// clock.now (after every thread of the block has read it).
__global__ void optimizer_rows_kernel(formulas::OptimizerStep step, int slots, MatrixView w,
                                      SparseRowGrad grad, float* s1, float* s2, RowClock clock,
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
        if (clock.last != nullptr) {
            const uint32_t last = clock.last[row];
            const uint32_t skipped = last < clock.now - 1 ? clock.now - 1 - last : 0u;
            const formulas::CatchUp cu = formulas::catch_up_coefficients(step, skipped);
            for (size_t c = threadIdx.x; c < n; c += blockDim.x) {
                const size_t off = base + c;
                if (skipped > 0) formulas::catch_up_element(cu, w.data[off], s1[off]);
                update_element(step, slots, w.data + off, g[c], s1 + off,
                               slots >= 2 ? s2 + off : nullptr);
            }
            __syncthreads();  // every thread read the clock
            if (threadIdx.x == 0) clock.last[row] = clock.now;
            continue;
        }
        for (size_t c = threadIdx.x; c < n; c += blockDim.x) {
            const size_t off = base + c;
            update_element(step, slots, w.data + off, g[c], slots >= 1 ? s1 + off : nullptr,
                           slots >= 2 ? s2 + off : nullptr);
        }
    }
}

// Catch-up of the rows a batch stores: one block per batch row, its entries in turn; thread 0
// swaps the entry's row clock to clock.now (atomicExch: of duplicate entries, in this batch row
// or another, exactly one sees the old clock and catches the row up).
__global__ void catch_up_batch_kernel(formulas::OptimizerStep step, MatrixView w, CsrBatchView x,
                                      float* s1, RowClock clock, DeviceStatus* status) {
    __shared__ uint32_t s_skipped;
    const size_t n = w.cols;
    for (size_t b = blockIdx.x; b < x.batch.batch; b += gridDim.x) {
        const uint64_t ex = example_of(x.batch, b);
        const uint64_t begin = x.offsets[ex], end = x.offsets[ex + 1];
        for (uint64_t e = begin; e < end; ++e) {
            const uint32_t row = x.indices[e];
            if (row >= w.rows) {
                if (threadIdx.x == 0)
                    report(status, kStatusRowOutOfRange, Op::kCatchUpRows, row, w.rows);
                continue;
            }
            if (threadIdx.x == 0) {
                const uint32_t last = atomicExch(clock.last + row, clock.now);
                s_skipped = last < clock.now ? clock.now - last : 0u;
            }
            __syncthreads();
            const uint32_t skipped = s_skipped;
            if (skipped > 0) {
                const formulas::CatchUp cu = formulas::catch_up_coefficients(step, skipped);
                const size_t base = size_t(row) * w.ld;
                for (size_t c = threadIdx.x; c < n; c += blockDim.x)
                    formulas::catch_up_element(cu, w.data[base + c], s1[base + c]);
            }
            __syncthreads();  // s_skipped is rewritten by the next entry
        }
    }
}

// Catch-up of every row: one block per row (grid-striding).
__global__ void catch_up_all_kernel(formulas::OptimizerStep step, MatrixView w, float* s1,
                                    RowClock clock) {
    const size_t n = w.cols;
    for (size_t row = blockIdx.x; row < w.rows; row += gridDim.x) {
        const uint32_t last = clock.last[row];
        const uint32_t skipped = last < clock.now ? clock.now - last : 0u;
        if (skipped > 0) {
            const formulas::CatchUp cu = formulas::catch_up_coefficients(step, skipped);
            const size_t base = row * w.ld;
            for (size_t c = threadIdx.x; c < n; c += blockDim.x)
                formulas::catch_up_element(cu, w.data[base + c], s1[base + c]);
        }
        __syncthreads();  // every thread read the clock
        if (threadIdx.x == 0) clock.last[row] = clock.now;
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
                           ConstMatrixView g, float* state1, float* state2, uint16_t* w_bf16) {
    if (w.rows == 0 || w.cols == 0) return;
    const int slots = formulas::optimizer_state_slots(step.kind);
    const Shape2d s = dims(elementwise_shape(w.rows, w.cols));
    optimizer_dense_kernel<<<s.grid, s.block, 0, ctx.stream>>>(step, slots, w, g, state1, state2,
                                                               w_bf16);
    check_launch(ctx, "optimizer_dense_kernel");
}

void launch_optimizer_step_rows(const Context& ctx, const formulas::OptimizerStep& step,
                                MatrixView w, const SparseRowGrad& grad, float* state1,
                                float* state2, SparseUpdate mode, RowClock clock,
                                ScratchBuffer& row_map) {
    if (w.rows == 0 || w.cols == 0) return;
    const int slots = formulas::optimizer_state_slots(step.kind);
    if (mode == SparseUpdate::kLazy || formulas::zero_gradient_is_noop(step) ||
        clock.last != nullptr) {
        if (grad.capacity == 0) return;
        // A block per gradient row, 16 per SM at most (grid-striding).
        const Shape2d g = dims(grid_stride_shape(grad.capacity, 1, 256, 16, ctx.sm_count));
        optimizer_rows_kernel<<<g.grid, g.block, 0, ctx.stream>>>(step, slots, w, grad, state1,
                                                                  state2, clock, ctx.status);
        check_launch(ctx, "optimizer_rows_kernel");
        return;
    }
    uint32_t* map = row_map.get_as<uint32_t>(ctx, w.rows, "optimizer_step_rows row map");
    check_cuda(cudaMemsetAsync(map, 0xff, w.rows * sizeof(uint32_t), ctx.stream), "cudaMemsetAsync",
               "clearing the optimizer_step_rows row map");
    if (grad.capacity > 0) {
        const Shape2d g = dims(grid_stride_shape(grad.capacity, 256, 256, 16, ctx.sm_count));
        build_row_map_kernel<<<g.grid, g.block, 0, ctx.stream>>>(grad, w.rows, map, ctx.status);
        check_launch(ctx, "build_row_map_kernel");
    }
    const Shape2d s = dims(elementwise_shape(w.rows, w.cols));
    optimizer_mapped_kernel<<<s.grid, s.block, 0, ctx.stream>>>(step, slots, w, grad.values, map,
                                                                state1, state2);
    check_launch(ctx, "optimizer_mapped_kernel");
}

void launch_catch_up_rows(const Context& ctx, const formulas::OptimizerStep& step, MatrixView w,
                          const CsrBatchView* x, float* state1, RowClock clock) {
    if (w.rows == 0) return;
    if (x == nullptr) {
        const Shape2d g = dims(grid_stride_shape(w.rows, 1, 256, 16, ctx.sm_count));
        catch_up_all_kernel<<<g.grid, g.block, 0, ctx.stream>>>(step, w, state1, clock);
        check_launch(ctx, "catch_up_all_kernel");
        return;
    }
    if (x->batch.batch == 0) return;
    const Shape2d g = dims(grid_stride_shape(x->batch.batch, 1, 256, 16, ctx.sm_count));
    catch_up_batch_kernel<<<g.grid, g.block, 0, ctx.stream>>>(step, w, *x, state1, clock,
                                                              ctx.status);
    check_launch(ctx, "catch_up_batch_kernel");
}

}  // namespace sparsenet::cuda
