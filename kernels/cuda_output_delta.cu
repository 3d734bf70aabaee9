// output_delta on CUDA: the output layer's delta and loss with sparse targets, never densified.
//
// Contract (src/backend/backend.h, CPU reference cpu::output_delta / output_delta_row in
// cpu_ops_sparse.h): delta := scale * w_b * dL/dz for a: [B, n] (ld) and a [B, n] CSR target
// batch; w_b = target.weights[example(b)] (1 when null). Losses: every ErrorFunction, on every
// activation (formulas/loss.h), SoftMax through its Jacobian (multinomial CrossEntropy directly,
// a * sum(t) - t, sum(t) = target.row_totals[example] when set). loss.ignore_zero: only stored
// targets count. DeltaBoost scales the element-wise deltas. If loss_sum is given, *loss_sum +=
// sum_b w_b * (row b's unscaled loss).
//
// Thread mapping: one block of 1,024 threads per batch row. The row's statistics come first,
// reading a only (SoftMax: sum(t) or dot = sum_j g_j a_j, in double over the block). Then one pass
// writes every element: the row is walked in segments of kSegment columns; the block marks the
// segment's stored targets in shared memory (their columns increase, so they are the next
// entries of the row), and the thread owning column j reads a[j] (or, output_epilogue, computes
// it from z), takes the stored target's delta or the zero target's and its loss term, and writes
// delta[j]. Every element's delta depends on its own activation and the row statistics only,
// and the one thread that reads a[j] writes delta[j]: so delta may be a (the delta written over
// the activations, Network::Impl::delta_over_activation), and the stored targets' corrections
// no longer wait for the whole zero-target pass. Overwrite semantics for delta.
//
// Loss: each thread accumulates its terms in double (a stored target's own term, not the
// zero-target term plus a correction); the block reduces them in a fixed order into
// row_loss[b] (scratch), and a second kernel (one block) adds the B row losses in a fixed order
// to *loss_sum (device memory): deterministic, bit-identical on every run. Differences from the
// CPU come from the device's log/exp (a few ulp per term) and the summation grouping (double):
// within 1e-5 relative (output_delta_test.cpp, CudaParity.*).
// output_epilogue (za != nullptr, element-wise activations): the thread owning a unit makes it
// a = f(z + bias) (activation_forward_kernel's expression), writes it back to z (unless delta is
// z) and takes its delta from that value: the two kernels' values bit for bit, with one read and
// one write of z less (compiles, untested on GPU).
// delta16 (nullable; issue 46): the thread that writes delta[j] also writes
// formulas::bf16_bits(delta[j]) at the same offset of delta16 (delta's layout), from the same
// register: the BF16 copy the GEMMs of backward read, without a conversion pass of their own
// (compiles, untested on GPU).
// A stored target column >= n is skipped and reported (Error(kInternal) at the next sync), and
// so is a target row whose column ids are not strictly increasing (a repeated column would make
// two threads write one delta): the CPU throws the same error at the call.
#include "cuda_common.cuh"
#include "formulas/loss.h"
#include "formulas/precision.h"

namespace sparsenet::cuda {

namespace {

// Threads per row (one block per row). 1024: each pass over a row is a chain of dependent loads
// per thread, so more threads are more bytes in flight. With 256, a 256 x 27,278 sigmoid +
// ScaledMarginalCrossEntropy delta took 188 us on an H100 (84 MB moved: about 0.45 TB/s).
// __launch_bounds__(kThreads, 2): two blocks per SM (2,048 threads) need at most 32 registers a
// thread; the writing pass's four activations held in registers fit that without spilling
// (ptxas, sm_90), where unbounded it took 51 and one block per SM.
constexpr int kThreads = 1024;
constexpr int kSumThreads = 256;

// Columns per segment of the writing pass: 4 per thread, so 16 KB of shared marks.
constexpr int kPerThread = 4;
constexpr int kSegment = kThreads * kPerThread;

__global__ void __launch_bounds__(kThreads, 2)
    output_delta_kernel(formulas::LossParams loss, formulas::ActivationParams act,
                        ConstMatrixView a, CsrBatchView target, float scale, MatrixView delta,
                        double* row_loss, float* row_norms, uint16_t* delta16, DeviceStatus* status,
                        float* za_all = nullptr, const float* bias = nullptr) {
    __shared__ double smem[kThreads / 32];
    // 1 + (entry - t0) of the stored target at column seg + i of the current segment; 0: none.
    __shared__ uint32_t stored_at[kSegment];
    const size_t b = blockIdx.x;
    const size_t n = a.cols;
    const uint64_t ex = example_of(target.batch, b);
    const float wb = target.weights != nullptr ? target.weights[ex] : 1.0f;
    const float sc = scale * wb;
    const uint64_t t0 = target.offsets[ex], t1 = target.offsets[ex + 1];
    const uint32_t* idx = target.indices;
    const float* ar = a.data + b * a.ld;
    float* za = za_all != nullptr ? za_all + b * a.ld : nullptr;  // same storage as ar
    float* dr = delta.data + b * delta.ld;                        // may be ar's storage too
    const bool want_loss = row_loss != nullptr;
    const bool iz = loss.ignore_zero;
    double lsum = 0.0;
    double sq = 0.0;  // row_norms: the sum of the row's squared activations

    for (int i = threadIdx.x; i < kSegment; i += kThreads) stored_at[i] = 0;
    // The writing pass writes delta[j] once per column, from the thread owning j: a row holding
    // column j twice (or out of order) is reported, not computed in some order (backend.h; the
    // readers and the trainer refuse datasets that break it).
    for (uint64_t e = t0 + threadIdx.x; e < t1; e += kThreads) {
        if (e > t0 && idx[e] <= idx[e - 1]) {
            report(status, kStatusTargetNotIncreasing, Op::kOutputDelta, ex, idx[e]);
        }
        if (idx[e] >= n) report(status, kStatusTargetOutOfRange, Op::kOutputDelta, idx[e], n);
    }

    // The row statistics, from a before anything is written (block_sum ends in a barrier).
    const bool softmax = act.kind == Activation::kSoftMax;
    const bool multinomial =
        softmax && loss.kind == ErrorFunction::kCrossEntropy && loss.multinomial;
    float tsf = 0.0f, dt = 0.0f;
    if (multinomial) {
        // sum(t): the whole row's (row_totals) when the targets are a column band of it.
        if (target.row_totals != nullptr) {
            tsf = target.row_totals[ex];
        } else {
            double ts = 0.0;
            for (uint64_t e = t0 + threadIdx.x; e < t1; e += kThreads)
                ts += double(csr_value(target, e));
            tsf = float(block_sum<kThreads>(ts, smem));
        }
    } else if (softmax) {
        // General SoftMax: delta_k = a_k (g_k - sum_j g_j a_j), g = dL/da (0 at absent targets
        // with ignore_zero).
        double dot = 0.0;
        if (!iz) {
            for (size_t j = threadIdx.x; j < n; j += kThreads)
                dot += double(formulas::loss_grad_element(loss, ar[j], 0.0f) * ar[j]);
        }
        for (uint64_t e = t0 + threadIdx.x; e < t1; e += kThreads) {
            const uint32_t j = idx[e];
            if (j >= n) continue;
            const float t = csr_value(target, e);
            dot += double(formulas::loss_grad_element(loss, ar[j], t) * ar[j]);
            if (!iz) dot -= double(formulas::loss_grad_element(loss, ar[j], 0.0f) * ar[j]);
        }
        dt = float(block_sum<kThreads>(dot, smem));
    }
    __syncthreads();  // the marks cleared

    // DeltaBoost scales the element-wise deltas of zero and nonzero targets (1 and 1 by default).
    const float scale_zero = sc * loss.boost_zero;
    const float scale_one = sc * loss.boost_one;
    uint64_t p = t0;  // the first stored target not yet marked
    for (size_t seg = 0; seg < n; seg += kSegment) {
        const size_t seg_end = n < seg + kSegment ? n : seg + kSegment;
        // Mark the segment's stored targets: the next entries of the row (increasing columns).
        for (;;) {
            const uint64_t e = p + threadIdx.x;
            const bool in = e < t1 && idx[e] >= seg && idx[e] < seg_end;
            if (in) stored_at[idx[e] - seg] = uint32_t(e - t0 + 1);
            const int count = __syncthreads_count(in);
            p += uint64_t(count);
            if (count < kThreads) break;
        }
        // The thread's kPerThread activations are loaded before any delta is written: each
        // element's delta depends on its own activation only, so this is the same result when
        // delta is a's storage, with four loads in flight per thread instead of one (a write to
        // dr may alias the next a[j], so the compiler could not reorder the one-element loop).
        // Why: the one-element loop moved 56 MB in 91 us per dsstne-bench step on an H100
        // (0.6 TB/s; 2026-11-28 profile), a chain of memory round trips per thread.
        float av[kPerThread];
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
            const size_t j = seg + threadIdx.x + size_t(k) * kThreads;
            av[k] = j < seg_end ? ar[j] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
            const size_t j = seg + threadIdx.x + size_t(k) * kThreads;
            if (j >= seg_end) continue;
            const uint32_t s = stored_at[j - seg];
            const bool has = s != 0;
            float aj = av[k];
            if (za != nullptr) aj = formulas::activate(act, bias != nullptr ? aj + bias[j] : aj);
            if (row_norms != nullptr) sq += double(aj) * double(aj);
            const float t = has ? csr_value(target, t0 + s - 1) : 0.0f;
            float dj;
            if (multinomial) {
                // The zero target's loss -0 * log(a) is 0: only stored targets count.
                dj = sc * formulas::multinomial_delta_element(aj, t, tsf);
                if (want_loss && has) lsum += double(formulas::loss_element(loss, aj, t));
            } else {
                if (softmax) {
                    const float g = iz && !has ? 0.0f : formulas::loss_grad_element(loss, aj, t);
                    dj = sc * formulas::softmax_delta_element(aj, g, dt);
                } else {
                    dj = iz && !has ? 0.0f
                                    : (t != 0.0f ? scale_one : scale_zero) *
                                          formulas::output_delta_element(loss, act, aj, t);
                }
                if (want_loss && (has || !iz)) lsum += double(formulas::loss_element(loss, aj, t));
            }
            if (za != nullptr && za != dr) za[j] = aj;
            dr[j] = dj;
            if (delta16 != nullptr) delta16[b * delta.ld + j] = formulas::bf16_bits(dj);
            if (has) stored_at[j - seg] = 0;
        }
        __syncthreads();  // the marks cleared before the next segment's
    }
    if (want_loss) {
        lsum = block_sum<kThreads>(lsum, smem);
        if (threadIdx.x == 0) row_loss[b] = double(wb) * lsum;
    }
    if (row_norms != nullptr) {
        sq = block_sum<kThreads>(sq, smem);
        if (threadIdx.x == 0) row_norms[b] = float(sqrt(sq));
    }
}

// *loss_sum += sum of row_loss[0 .. rows), in a fixed order (one block).
__global__ void __launch_bounds__(kSumThreads)
    sum_rows_kernel(const double* row_loss, size_t rows, double* loss_sum) {
    __shared__ double smem[kSumThreads / 32];
    double acc = 0.0;
    for (size_t r = threadIdx.x; r < rows; r += kSumThreads) acc += row_loss[r];
    acc = block_sum<kSumThreads>(acc, smem);
    if (threadIdx.x == 0) *loss_sum += acc;
}

}  // namespace

void launch_output_delta(const Context& ctx, const formulas::LossParams& loss,
                         const formulas::ActivationParams& act, ConstMatrixView a,
                         const CsrBatchView& target, float scale, MatrixView delta,
                         double* loss_sum, float* row_norms, uint16_t* delta16,
                         ScratchBuffer& row_loss) {
    const size_t rows = a.rows;
    if (rows == 0) return;
    if (rows > 0x7fffffffu)
        throw Error(ErrorCategory::kInternal, "output_delta: too many rows for the CUDA grid");
    double* rl = nullptr;
    if (loss_sum != nullptr) rl = row_loss.get_as<double>(ctx, rows, "output_delta row losses");
    const Shape2d g = dims(row_blocks_shape(rows, kThreads));  // a block per row
    output_delta_kernel<<<g.grid, g.block, 0, ctx.stream>>>(loss, act, a, target, scale, delta, rl,
                                                            row_norms, delta16, ctx.status);
    check_launch(ctx, "output_delta_kernel");
    if (loss_sum != nullptr) {
        sum_rows_kernel<<<1, kSumThreads, 0, ctx.stream>>>(rl, rows, loss_sum);
        check_launch(ctx, "sum_rows_kernel");
    }
}

void launch_output_epilogue(const Context& ctx, const formulas::LossParams& loss,
                            const formulas::ActivationParams& act, const float* bias, MatrixView z,
                            const CsrBatchView& target, float scale, MatrixView delta,
                            double* loss_sum, float* row_norms, uint16_t* delta16,
                            ScratchBuffer& row_loss) {
    if (act.kind == Activation::kSoftMax) {  // row-wise: the softmax kernel, then the delta
        launch_bias_activation_forward(ctx, act, bias, z);
        launch_output_delta(ctx, loss, act, z, target, scale, delta, loss_sum, row_norms, delta16,
                            row_loss);
        return;
    }
    const size_t rows = z.rows;
    if (rows == 0) return;
    if (rows > 0x7fffffffu)
        throw Error(ErrorCategory::kInternal, "output_epilogue: too many rows for the CUDA grid");
    double* rl = nullptr;
    if (loss_sum != nullptr) rl = row_loss.get_as<double>(ctx, rows, "output_delta row losses");
    const Shape2d g = dims(row_blocks_shape(rows, kThreads));  // a block per row
    output_delta_kernel<<<g.grid, g.block, 0, ctx.stream>>>(loss, act, ConstMatrixView(z), target,
                                                            scale, delta, rl, row_norms, delta16,
                                                            ctx.status, z.data, bias);
    check_launch(ctx, "output_delta_kernel (epilogue)");
    if (loss_sum != nullptr) {
        sum_rows_kernel<<<1, kSumThreads, 0, ctx.stream>>>(rl, rows, loss_sum);
        check_launch(ctx, "sum_rows_kernel");
    }
}

}  // namespace sparsenet::cuda
