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
// Thread mapping: one block of 256 threads per batch row (DSSTNE's Raw + NonZero split fused in
// one kernel): the zero-target pass over the row's n units (threads stride over columns), a
// __syncthreads(), then the correction pass over the row's stored targets (threads stride over
// the entries), which overwrites the delta at those columns. SoftMax rows first reduce
// sum(t) or dot = sum_j g_j a_j in double over the block. Overwrite semantics for delta.
//
// Loss: each thread accumulates its terms in double; the block reduces them in a fixed order
// into row_loss[b] (scratch), and a second kernel (one block) adds the B row losses in a fixed
// order to *loss_sum (device memory): deterministic, bit-identical on every run. Differences
// from the CPU come from the device's log/exp (a few ulp per term) and the summation grouping
// (double): within 1e-5 relative (output_delta_test.cpp, CudaParity.*).
// output_epilogue (za != nullptr, element-wise activations): the zero-target pass first makes
// each of its thread's units a = f(z + bias) (activation_forward_kernel's expression), writes it
// back to z and takes its delta from that value; the __syncthreads() before the corrections
// makes every unit's activation visible to the block. So the values are the two kernels' bit for
// bit, with one read and one write of z less (compiles, untested on GPU).
// A stored target column >= n is skipped and reported (Error(kInternal) at the next sync), and
// so is a target row whose column ids are not strictly increasing (a repeated column would make
// two threads write one delta): the CPU throws the same error at the call.
#include "cuda_common.cuh"
#include "formulas/loss.h"

namespace sparsenet::cuda {

namespace {

// Threads per row (one block per row). 1024: each pass over a row is a chain of dependent loads
// per thread, so more threads are more bytes in flight. With 256, a 256 x 27,278 sigmoid +
// ScaledMarginalCrossEntropy delta took 188 us on an H100 (84 MB moved: about 0.45 TB/s).
constexpr int kThreads = 1024;
constexpr int kSumThreads = 256;

__global__ void __launch_bounds__(kThreads)
    output_delta_kernel(formulas::LossParams loss, formulas::ActivationParams act,
                        ConstMatrixView a, CsrBatchView target, float scale, MatrixView delta,
                        double* row_loss, DeviceStatus* status, float* za_all = nullptr,
                        const float* bias = nullptr) {
    __shared__ double smem[kThreads / 32];
    const size_t b = blockIdx.x;
    const size_t n = a.cols;
    const uint64_t ex = example_of(target.batch, b);
    const float wb = target.weights != nullptr ? target.weights[ex] : 1.0f;
    const float sc = scale * wb;
    const uint64_t t0 = target.offsets[ex], t1 = target.offsets[ex + 1];
    const uint32_t* idx = target.indices;
    const float* ar = a.data + b * a.ld;
    float* za = za_all != nullptr ? za_all + b * a.ld : nullptr;  // same storage as ar
    float* dr = delta.data + b * delta.ld;
    const bool want_loss = row_loss != nullptr;
    const bool iz = loss.ignore_zero;
    double lsum = 0.0;

    // The correction passes write delta[j] once per stored target, from several threads: a row
    // holding column j twice would race (and count j's loss twice). Target rows must hold
    // strictly increasing column ids (backend.h; the readers and the trainer refuse datasets
    // that do not), so a row breaking it is reported, not computed in some order.
    for (uint64_t e = t0 + 1 + threadIdx.x; e < t1; e += kThreads) {
        if (idx[e] <= idx[e - 1]) {
            report(status, kStatusTargetNotIncreasing, Op::kOutputDelta, ex, idx[e]);
        }
    }

    if (act.kind == Activation::kSoftMax) {
        if (loss.kind == ErrorFunction::kCrossEntropy && loss.multinomial) {
            // sum(t): the whole row's (row_totals) when the targets are a column band of it.
            float tsf;
            if (target.row_totals != nullptr) {
                tsf = target.row_totals[ex];
            } else {
                double ts = 0.0;
                for (uint64_t e = t0 + threadIdx.x; e < t1; e += kThreads)
                    ts += double(csr_value(target, e));
                ts = block_sum<kThreads>(ts, smem);
                tsf = float(ts);
            }
            for (size_t j = threadIdx.x; j < n; j += kThreads)
                dr[j] = sc * formulas::multinomial_delta_element(ar[j], 0.0f, tsf);
            __syncthreads();
            for (uint64_t e = t0 + threadIdx.x; e < t1; e += kThreads) {
                const uint32_t j = idx[e];
                if (j >= n) {
                    report(status, kStatusTargetOutOfRange, Op::kOutputDelta, j, n);
                    continue;
                }
                const float t = csr_value(target, e);
                dr[j] = sc * formulas::multinomial_delta_element(ar[j], t, tsf);
                if (want_loss) lsum += double(formulas::loss_element(loss, ar[j], t));
            }
            if (want_loss) {
                lsum = block_sum<kThreads>(lsum, smem);
                if (threadIdx.x == 0) row_loss[b] = double(wb) * lsum;
            }
            return;
        }
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
        dot = block_sum<kThreads>(dot, smem);
        const float dt = float(dot);
        for (size_t j = threadIdx.x; j < n; j += kThreads) {
            const float g = iz ? 0.0f : formulas::loss_grad_element(loss, ar[j], 0.0f);
            dr[j] = sc * formulas::softmax_delta_element(ar[j], g, dt);
        }
        __syncthreads();
        for (uint64_t e = t0 + threadIdx.x; e < t1; e += kThreads) {
            const uint32_t j = idx[e];
            if (j >= n) {
                report(status, kStatusTargetOutOfRange, Op::kOutputDelta, j, n);
                continue;
            }
            const float g = formulas::loss_grad_element(loss, ar[j], csr_value(target, e));
            dr[j] = sc * formulas::softmax_delta_element(ar[j], g, dt);
        }
    } else {
        // DeltaBoost scales the delta of zero and nonzero targets (1 and 1 by default).
        const float scale_zero = sc * loss.boost_zero;
        const float scale_one = sc * loss.boost_one;
        for (size_t j = threadIdx.x; j < n; j += kThreads) {
            float aj = ar[j];
            if (za != nullptr) {
                aj = formulas::activate(act, bias != nullptr ? aj + bias[j] : aj);
                za[j] = aj;
            }
            dr[j] = iz ? 0.0f : scale_zero * formulas::output_delta_element(loss, act, aj, 0.0f);
        }
        __syncthreads();
        for (uint64_t e = t0 + threadIdx.x; e < t1; e += kThreads) {
            const uint32_t j = idx[e];
            if (j >= n) {
                report(status, kStatusTargetOutOfRange, Op::kOutputDelta, j, n);
                continue;
            }
            const float t = csr_value(target, e);
            dr[j] = (t != 0.0f ? scale_one : scale_zero) *
                    formulas::output_delta_element(loss, act, ar[j], t);
        }
    }
    if (want_loss) {
        if (!iz) {
            for (size_t j = threadIdx.x; j < n; j += kThreads)
                lsum += double(formulas::loss_element(loss, ar[j], 0.0f));
        }
        for (uint64_t e = t0 + threadIdx.x; e < t1; e += kThreads) {
            const uint32_t j = idx[e];
            if (j >= n) continue;
            lsum += double(formulas::loss_element(loss, ar[j], csr_value(target, e)));
            if (!iz) lsum -= double(formulas::loss_element(loss, ar[j], 0.0f));
        }
        lsum = block_sum<kThreads>(lsum, smem);
        if (threadIdx.x == 0) row_loss[b] = double(wb) * lsum;
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
                         double* loss_sum, ScratchBuffer& row_loss) {
    const size_t rows = a.rows;
    if (rows == 0) return;
    if (rows > 0x7fffffffu)
        throw Error(ErrorCategory::kInternal, "output_delta: too many rows for the CUDA grid");
    double* rl = nullptr;
    if (loss_sum != nullptr) rl = row_loss.get_as<double>(ctx, rows, "output_delta row losses");
    const Shape2d g = dims(row_blocks_shape(rows, kThreads));  // a block per row
    output_delta_kernel<<<g.grid, g.block, 0, ctx.stream>>>(loss, act, a, target, scale, delta, rl,
                                                            ctx.status);
    check_launch(ctx, "output_delta_kernel");
    if (loss_sum != nullptr) {
        sum_rows_kernel<<<1, kSumThreads, 0, ctx.stream>>>(rl, rows, loss_sum);
        check_launch(ctx, "sum_rows_kernel");
    }
}

void launch_output_epilogue(const Context& ctx, const formulas::LossParams& loss,
                            const formulas::ActivationParams& act, const float* bias, MatrixView z,
                            const CsrBatchView& target, float scale, MatrixView delta,
                            double* loss_sum, ScratchBuffer& row_loss) {
    if (act.kind == Activation::kSoftMax) {  // row-wise: the softmax kernel, then the delta
        launch_bias_activation_forward(ctx, act, bias, z);
        launch_output_delta(ctx, loss, act, z, target, scale, delta, loss_sum, row_loss);
        return;
    }
    const size_t rows = z.rows;
    if (rows == 0) return;
    if (rows > 0x7fffffffu)
        throw Error(ErrorCategory::kInternal, "output_epilogue: too many rows for the CUDA grid");
    double* rl = nullptr;
    if (loss_sum != nullptr) rl = row_loss.get_as<double>(ctx, rows, "output_delta row losses");
    const Shape2d g = dims(row_blocks_shape(rows, kThreads));  // a block per row
    output_delta_kernel<<<g.grid, g.block, 0, ctx.stream>>>(
        loss, act, ConstMatrixView(z), target, scale, delta, rl, ctx.status, z.data, bias);
    check_launch(ctx, "output_delta_kernel (epilogue)");
    if (loss_sum != nullptr) {
        sum_rows_kernel<<<1, kSumThreads, 0, ctx.stream>>>(rl, rows, loss_sum);
        check_launch(ctx, "sum_rows_kernel");
    }
}

}  // namespace sparsenet::cuda
