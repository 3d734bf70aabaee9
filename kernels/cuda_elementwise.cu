// Element-wise CUDA kernels: fill, add_matrix, scaling, bias + activation (SoftMax row-wise),
// activation backward with the dropout mask, dropout, and the add pass of scatter_rows.
//
// Contracts (src/backend/backend.h) and CPU references (src/backend/cpu/cpu_ops_dense.h,
// cpu_ops_sparse.h for scatter_rows):
//  * Layout: row-major [rows, cols] views with a leading dimension; padding columns are never
//    read or written.
//  * Thread mapping: elementwise_shape() (kernels/launch_shapes.h): one thread per element, 2-D
//    blocks of 256 threads (x over columns, 32..256 wide; y over rows), grid looping over rows.
//    SoftMax: one block of 256 threads per row. scatter_rows: one block per gradient row.
//  * Overwrite / accumulate: as the op table says (in place for activations and dropout;
//    add_matrix with beta == 0 overwrites, NaNs included).
//  * Determinism: one thread per output element, no atomics: bit-identical on every run. The
//    element formulas are kernels/formulas/ (the CPU's own); results differ from the CPU only by
//    the device's transcendental functions (a few ulp) and fused multiply-adds: within 1e-5
//    relative (tests/backend/activation_test.cpp, CudaParity.*).
//  * Dropout masks: formulas::keep_unit(seed, example, col_offset + c, p), the CPU's hash.
//  * BF16 copies (out16, nullable; issue 46): the activation, dropout and backward kernels also
//    write formulas::bf16_bits of each value they write at the same offset of out16 (the FP32
//    output's layout; padding not written), from the register that holds it: 2 B more written
//    per element, no pass of its own (compiles, untested on GPU).
#include "cuda_common.cuh"
#include "formulas/activation.h"
#include "formulas/dropout.h"
#include "formulas/precision.h"
#include "formulas/rng.h"

namespace sparsenet::cuda {

namespace {

// 1024: a row's passes are chains of dependent loads, so the row's threads are its memory
// parallelism. With 256, a 500 x 27,278 SoftMax took 253 us on an H100 (about 0.3 TB/s).
constexpr int kSoftmaxThreads = 1024;

__global__ void fill_kernel(float* dst, size_t n, float value) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x)
        dst[i] = value;
}

__global__ void add_matrix_kernel(float alpha, ConstMatrixView x, float beta, MatrixView y) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= y.cols) return;
    SN_ROWS_LOOP(r, y.rows) {
        float* yp = y.data + r * y.ld + c;
        const float xv = x.data[r * x.ld + c];
        *yp = beta == 0.0f ? alpha * xv : alpha * xv + beta * *yp;
    }
}

__global__ void scale_matrix_kernel(float beta, MatrixView m) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= m.cols) return;
    SN_ROWS_LOOP(r, m.rows) {
        float* p = m.data + r * m.ld + c;
        *p = beta == 0.0f ? 0.0f : *p * beta;
    }
}

__global__ void round_bf16_kernel(ConstMatrixView m, uint16_t* dst, size_t dst_ld) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= dst_ld) return;
    SN_ROWS_LOOP(r, m.rows) {
        dst[r * dst_ld + c] = c < m.cols ? formulas::bf16_bits(m.data[r * m.ld + c]) : uint16_t(0);
    }
}

__global__ void activation_forward_kernel(formulas::ActivationParams act, const float* bias,
                                          MatrixView z, uint16_t* out16) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= z.cols) return;
    const float b = bias != nullptr ? bias[c] : 0.0f;
    SN_ROWS_LOOP(r, z.rows) {
        float* p = z.data + r * z.ld + c;
        const float v = formulas::activate(act, bias != nullptr ? *p + b : *p);
        *p = v;
        if (out16 != nullptr) out16[r * z.ld + c] = formulas::bf16_bits(v);
    }
}

// One block per row: z += bias; z = exp(z - max) / sum, the sum in double (as the CPU).
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_forward_kernel(const float* bias, MatrixView z, uint16_t* out16) {
    __shared__ float smax[kSoftmaxThreads / 32];
    __shared__ double ssum[kSoftmaxThreads / 32];
    const size_t n = z.cols;
    float* zr = z.data + size_t(blockIdx.x) * z.ld;
    float mx = -INFINITY;
    for (size_t j = threadIdx.x; j < n; j += kSoftmaxThreads) {
        float v = zr[j];
        if (bias != nullptr) {
            v += bias[j];
            zr[j] = v;
        }
        mx = v > mx ? v : mx;
    }
    mx = block_max<kSoftmaxThreads>(mx, smax);
    double sum = 0.0;
    for (size_t j = threadIdx.x; j < n; j += kSoftmaxThreads) {
        const float e = formulas::sn_exp(zr[j] - mx);
        zr[j] = e;
        sum += double(e);
    }
    sum = block_sum<kSoftmaxThreads>(sum, ssum);
    const float inv = float(1.0 / sum);
    uint16_t* o16 = out16 != nullptr ? out16 + size_t(blockIdx.x) * z.ld : nullptr;
    for (size_t j = threadIdx.x; j < n; j += kSoftmaxThreads) {
        const float v = zr[j] * inv;
        zr[j] = v;
        if (o16 != nullptr) o16[j] = formulas::bf16_bits(v);
    }
}

__global__ void activation_backward_kernel(formulas::ActivationParams act, ConstMatrixView a,
                                           MatrixView d, uint16_t* out16) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= d.cols) return;
    SN_ROWS_LOOP(r, d.rows) {
        float* dp = d.data + r * d.ld + c;
        const float v = *dp * formulas::derivative_from_output(act, a.data[r * a.ld + c]);
        *dp = v;
        if (out16 != nullptr) out16[r * d.ld + c] = formulas::bf16_bits(v);
    }
}

__global__ void activation_backward_masked_kernel(formulas::ActivationParams act, ConstMatrixView a,
                                                  DropoutMask mask, MatrixView d, uint16_t* out16) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= d.cols) return;
    const formulas::DropoutParams& dp = mask.params;
    const float scale = dp.scale;
    const uint64_t col = uint64_t(mask.col_offset) + c;
    SN_ROWS_LOOP(r, d.rows) {
        float* p = d.data + r * d.ld + c;
        const bool keep = formulas::keep_unit(dp.seed, example_of(mask.rows, r), col, dp.p);
        const float x = formulas::dropout_input(dp, a.data[r * a.ld + c]);
        const float v = keep ? *p * scale * formulas::derivative_from_output(act, x) : 0.0f;
        *p = v;
        if (out16 != nullptr) out16[r * d.ld + c] = formulas::bf16_bits(v);
    }
}

__global__ void dropout_kernel(DropoutMask mask, MatrixView m) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= m.cols) return;
    const uint64_t col = uint64_t(mask.col_offset) + c;
    SN_ROWS_LOOP(r, m.rows) {
        float* p = m.data + r * m.ld + c;
        const bool keep =
            formulas::keep_unit(mask.params.seed, example_of(mask.rows, r), col, mask.params.p);
        *p = formulas::dropout_forward(mask.params, keep, *p);
    }
}

// bias_activation_dropout for element-wise activations: activation_forward_kernel's value, then
// dropout_kernel's, per element in registers: the two kernels' bits with one read and one write
// of z less (compiles, untested on GPU).
__global__ void activation_dropout_kernel(formulas::ActivationParams act, const float* bias,
                                          DropoutMask mask, MatrixView z, uint16_t* out16) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= z.cols) return;
    const float b = bias != nullptr ? bias[c] : 0.0f;
    const uint64_t col = uint64_t(mask.col_offset) + c;
    SN_ROWS_LOOP(r, z.rows) {
        float* p = z.data + r * z.ld + c;
        const float a = formulas::activate(act, bias != nullptr ? *p + b : *p);
        const bool keep =
            formulas::keep_unit(mask.params.seed, example_of(mask.rows, r), col, mask.params.p);
        const float v = formulas::dropout_forward(mask.params, keep, a);
        *p = v;
        if (out16 != nullptr) out16[r * z.ld + c] = formulas::bf16_bits(v);
    }
}

// dense[rows[i], :] += values[i, :] for i < min(*count, capacity); one block per i (grid-stride).
__global__ void scatter_rows_add_kernel(SparseRowGrad grad, MatrixView dense,
                                        DeviceStatus* status) {
    const uint32_t stored = *grad.count;
    if (stored > grad.capacity && blockIdx.x == 0 && threadIdx.x == 0)
        report(status, kStatusCountOverCapacity, Op::kScatterRows, stored, grad.capacity);
    const size_t count = stored < grad.capacity ? stored : grad.capacity;
    const size_t n = dense.cols;
    for (size_t i = blockIdx.x; i < count; i += gridDim.x) {
        const uint32_t row = grad.rows[i];
        if (row >= dense.rows) {
            if (threadIdx.x == 0)
                report(status, kStatusRowOutOfRange, Op::kScatterRows, row, dense.rows);
            continue;
        }
        float* dr = dense.data + size_t(row) * dense.ld;
        const float* g = grad.values + i * n;
        for (size_t j = threadIdx.x; j < n; j += blockDim.x) dr[j] += g[j];
    }
}

__global__ void probe_kernel(int* out) {
    if (out != nullptr) *out = 1;
}

}  // namespace

cudaError_t probe_kernel_image() {
    cudaFuncAttributes attr;
    return cudaFuncGetAttributes(&attr, probe_kernel);
}

void launch_fill(const Context& ctx, float* dst, size_t n, float value) {
    if (n == 0) return;
    const Shape2d g = dims(grid_stride_shape(n, 256, 256, 32, ctx.sm_count));
    fill_kernel<<<g.grid, g.block, 0, ctx.stream>>>(dst, n, value);
    check_launch(ctx, "fill_kernel");
}

void launch_add_matrix(const Context& ctx, float alpha, ConstMatrixView x, float beta,
                       MatrixView y) {
    if (y.rows == 0 || y.cols == 0) return;
    const Shape2d s = dims(elementwise_shape(y.rows, y.cols));
    add_matrix_kernel<<<s.grid, s.block, 0, ctx.stream>>>(alpha, x, beta, y);
    check_launch(ctx, "add_matrix_kernel");
}

void launch_scale_matrix(const Context& ctx, float beta, MatrixView m) {
    if (m.rows == 0 || m.cols == 0 || beta == 1.0f) return;
    const Shape2d s = dims(elementwise_shape(m.rows, m.cols));
    scale_matrix_kernel<<<s.grid, s.block, 0, ctx.stream>>>(beta, m);
    check_launch(ctx, "scale_matrix_kernel");
}

void launch_round_bf16(const Context& ctx, ConstMatrixView m, uint16_t* dst, size_t dst_ld) {
    if (m.rows == 0 || dst_ld == 0) return;
    const Shape2d s = dims(elementwise_shape(m.rows, dst_ld));
    round_bf16_kernel<<<s.grid, s.block, 0, ctx.stream>>>(m, dst, dst_ld);
    check_launch(ctx, "round_bf16_kernel");
}

void launch_bias_activation_forward(const Context& ctx, const formulas::ActivationParams& act,
                                    const float* bias, MatrixView z, uint16_t* out16) {
    if (z.rows == 0 || z.cols == 0) return;
    if (act.kind == Activation::kSoftMax) {
        if (z.rows > 0x7fffffffu) throw Error(ErrorCategory::kInternal, "softmax: too many rows");
        const Shape2d g = dims(row_blocks_shape(z.rows, kSoftmaxThreads));  // a block per row
        softmax_forward_kernel<<<g.grid, g.block, 0, ctx.stream>>>(bias, z, out16);
        check_launch(ctx, "softmax_forward_kernel");
        return;
    }
    const Shape2d s = dims(elementwise_shape(z.rows, z.cols));
    activation_forward_kernel<<<s.grid, s.block, 0, ctx.stream>>>(act, bias, z, out16);
    check_launch(ctx, "activation_forward_kernel");
}

void launch_activation_backward(const Context& ctx, const formulas::ActivationParams& act,
                                ConstMatrixView a, const DropoutMask* mask, MatrixView d,
                                uint16_t* out16) {
    if (d.rows == 0 || d.cols == 0) return;
    const Shape2d s = dims(elementwise_shape(d.rows, d.cols));
    if (mask != nullptr && mask->params.p > 0.0f) {
        activation_backward_masked_kernel<<<s.grid, s.block, 0, ctx.stream>>>(act, a, *mask, d,
                                                                              out16);
        check_launch(ctx, "activation_backward_masked_kernel");
    } else {
        activation_backward_kernel<<<s.grid, s.block, 0, ctx.stream>>>(act, a, d, out16);
        check_launch(ctx, "activation_backward_kernel");
    }
}

void launch_dropout(const Context& ctx, const DropoutMask& mask, MatrixView m) {
    if (!(mask.params.p > 0.0f) || m.rows == 0 || m.cols == 0) return;
    const Shape2d s = dims(elementwise_shape(m.rows, m.cols));
    dropout_kernel<<<s.grid, s.block, 0, ctx.stream>>>(mask, m);
    check_launch(ctx, "dropout_kernel");
}

void launch_bias_activation_dropout(const Context& ctx, const formulas::ActivationParams& act,
                                    const float* bias, const DropoutMask& mask, MatrixView z,
                                    uint16_t* out16) {
    if (!(mask.params.p > 0.0f)) {  // no mask: the activation alone writes the copy
        launch_bias_activation_forward(ctx, act, bias, z, out16);
        return;
    }
    if (act.kind == Activation::kSoftMax) {  // row-wise: two kernels, then the copy's own pass
        launch_bias_activation_forward(ctx, act, bias, z);
        launch_dropout(ctx, mask, z);
        if (out16 != nullptr) launch_round_bf16(ctx, z, out16, z.ld > z.cols ? z.ld : z.cols);
        return;
    }
    if (z.rows == 0 || z.cols == 0) return;
    const Shape2d s = dims(elementwise_shape(z.rows, z.cols));
    activation_dropout_kernel<<<s.grid, s.block, 0, ctx.stream>>>(act, bias, mask, z, out16);
    check_launch(ctx, "activation_dropout_kernel");
}

void launch_scatter_rows_add(const Context& ctx, const SparseRowGrad& grad, MatrixView dense) {
    if (dense.rows == 0 || dense.cols == 0 || grad.capacity == 0) return;
    // A block per gradient row (grid-striding over the stored rows), 16 per SM at most.
    const Shape2d g = dims(grid_stride_shape(grad.capacity, 1, 256, 16, ctx.sm_count));
    scatter_rows_add_kernel<<<g.grid, g.block, 0, ctx.stream>>>(grad, dense, ctx.status);
    check_launch(ctx, "scatter_rows_add_kernel");
}

}  // namespace sparsenet::cuda
