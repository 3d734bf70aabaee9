// Reductions on CUDA: column_sum (bias gradients), sparseness_penalty, normalize_rows (DeltaNorm)
// and normalize_columns (WeightNorm), and the row statistics of a layer split by columns
// (row_max, exp_rows, divide_rows, row_sum_squares, clip_rows).
//
// Contracts (src/backend/backend.h) and CPU references (src/backend/cpu/cpu_ops_dense.h):
//  * column_sum: out[c] = alpha * sum_r m[r, c] + beta * out[c] (beta == 0 overwrites), sums in
//    double. m: [rows, cols] (ld), out: [cols].
//  * sparseness_penalty: rho_c = mean_r a[r, c] (double), clamped; delta[r, c] += scale * beta *
//    KL'(p, rho_c) (0 where clamped; delta.data == nullptr: loss only); *loss_sum += rows * beta *
//    sum_c KL(p || rho_c). formulas/regularizer.h.
//  * normalize_rows / normalize_columns: a row (column) whose L2 norm (squares summed in double)
//    exceeds max_norm is scaled to max_norm; others are not written at all.
//  * row_max: out[r] = max_j m[r, j], NaNs ignored (block_max), -inf for an empty row.
//    exp_rows: m := exp(m - shift[r]) (the SoftMax kernel's exp), row_sum[r] = the new row's sum
//    in double, stored as float. divide_rows: m[r, :] /= divisor[r]. row_sum_squares: out[r] =
//    sum_j m[r, j]^2 in double, stored as float. clip_rows: normalize_rows' factor from the
//    given sq_norm[r]; rows within the bound are not written.
//
// Column reductions run in two kernels: column_partial_kernel, a block of 32 columns x 8 row
// lanes per (32 columns, chunk of rows): lane y sums rows y, y + 8, ... of the chunk in
// increasing order in double, then the 8 lane sums are added in lane order (a warp reads 32
// adjacent floats of a row: coalesced); then column_finalize_kernel, one thread per column adding
// the chunk partials in chunk order and applying the op. The chunking (column_reduce_shape,
// kernels/launch_shapes.h: 8 to 64 rows per chunk, at least 512 blocks where the shape allows)
// depends only on the shape, never on the device, so the result is bit-identical on every run
// and every GPU; it differs from the CPU's single sequential double sum by double rounding only:
// each of the <= rows additions in double adds at most 2^-53 of the sum of |terms|, so for any
// rows < 2^20 the two sums differ by under 2^-32 (2.3e-10) of that sum, against the parity
// tolerance of 1e-5 relative: the chunking can only matter for a column whose sum cancels to
// under 2.3e-5 of its terms' magnitudes. Row norms: one block of 256
// threads per row, a fixed-order block reduction in double; the row statistics (row_max,
// exp_rows, row_sum_squares) likewise, one block of 256 threads per row (row_sum_squares of a row
// over 65,536 values: a block per 8,192-value segment, then the segments added in order);
// divide_rows and clip_rows are element-wise (elementwise_shape). The penalty's loss is summed over
// the columns by one block in a fixed order. Tolerance: 1e-5 relative (row_ops_test.cpp,
// regularizer_test.cpp: CudaParity.*).
#include <algorithm>
#include <string>
#include <vector>

#include "cuda_common.cuh"
#include "formulas/activation.h"
#include "formulas/common.h"
#include "formulas/dropout.h"
#include "formulas/precision.h"
#include "formulas/regularizer.h"
#include "formulas/rng.h"

namespace sparsenet::cuda {

namespace {

constexpr int kRowThreads = 256;
constexpr int kSquaresInFlight = 4;  // sum_squares_chunks_kernel
constexpr int kSumThreads = 256;

constexpr int kColumnThreads = int(kColumnTileCols * kColumnRowLanes);  // 32 x 8 = 256

// The end of a block's work in a column reduction: the 8 row lanes' sums (acc) of column c added
// in lane order (a fixed order: deterministic), written as partial[chunk, c].
__device__ __forceinline__ void column_lanes_store(double acc, size_t c, size_t cols,
                                                   double* partial) {
    __shared__ double lanes[kColumnRowLanes][kColumnTileCols];
    lanes[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        double s = lanes[0][threadIdx.x];
#pragma unroll
        for (unsigned y = 1; y < kColumnRowLanes; ++y) s += lanes[y][threadIdx.x];
        partial[size_t(blockIdx.y) * cols + c] = s;
    }
}

// m: [rows, cols]; grid (ceil(cols / 32), chunks), block (32, 8) (column_reduce_shape).
// partial: [chunks, cols] doubles, the sums (of squares) of each chunk's rows.
template <bool Square>
__global__ void __launch_bounds__(kColumnThreads)
    column_partial_kernel(ConstMatrixView m, size_t chunk_rows, double* partial) {
    const size_t c = size_t(blockIdx.x) * kColumnTileCols + threadIdx.x;
    const size_t r0 = size_t(blockIdx.y) * chunk_rows;
    const size_t r1 = r0 + chunk_rows < m.rows ? r0 + chunk_rows : m.rows;
    double acc = 0.0;
    if (c < m.cols) {  // no early return: every thread reaches the lanes' barrier
        for (size_t r = r0 + threadIdx.y; r < r1; r += kColumnRowLanes) {
            const double v = double(m.data[r * m.ld + c]);
            acc += Square ? v * v : v;
        }
    }
    column_lanes_store(acc, c, m.cols, partial);
}

// activation_backward_column_sum: column_partial_kernel's mapping and chunks, each element of d
// first turned into dL/dZ as activation_backward's kernels do (same formulas), written back, then
// added: the column sums are column_sum's of the new d, bit for bit, in one pass over d.
// out16 (nullable): the BF16 copy of the new d (d's layout), written beside it (issue 46).
// dsstne-bench's hidden layers: d, a: [256, 1,024] (1 MB each): grid (32, 16) = 512 blocks.
template <bool Masked>
__global__ void __launch_bounds__(kColumnThreads)
    backward_column_partial_kernel(formulas::ActivationParams act, ConstMatrixView a,
                                   DropoutMask mask, MatrixView d, size_t chunk_rows,
                                   double* partial, uint16_t* out16) {
    const size_t c = size_t(blockIdx.x) * kColumnTileCols + threadIdx.x;
    const size_t r0 = size_t(blockIdx.y) * chunk_rows;
    const size_t r1 = r0 + chunk_rows < d.rows ? r0 + chunk_rows : d.rows;
    const formulas::DropoutParams& dp = mask.params;
    const uint64_t col = uint64_t(mask.col_offset) + c;
    double acc = 0.0;
    if (c < d.cols) {  // no early return: every thread reaches the lanes' barrier
        for (size_t r = r0 + threadIdx.y; r < r1; r += kColumnRowLanes) {
            float* p = d.data + r * d.ld + c;
            float v;
            if (Masked) {
                const bool keep = formulas::keep_unit(dp.seed, example_of(mask.rows, r), col, dp.p);
                const float x = formulas::dropout_input(dp, a.data[r * a.ld + c]);
                v = keep ? *p * dp.scale * formulas::derivative_from_output(act, x) : 0.0f;
            } else {
                v = *p * formulas::derivative_from_output(act, a.data[r * a.ld + c]);
            }
            *p = v;
            if (out16 != nullptr) out16[r * d.ld + c] = formulas::bf16_bits(v);
            acc += double(v);
        }
    }
    column_lanes_store(acc, c, d.cols, partial);
}

template <class Epilogue>
__global__ void column_finalize_kernel(const double* partial, size_t chunks, size_t cols,
                                       Epilogue epi) {
    for (size_t c = size_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
         c += size_t(gridDim.x) * blockDim.x) {
        double s = 0.0;
        for (size_t k = 0; k < chunks; ++k) s += partial[k * cols + c];
        epi(c, s);
    }
}

struct ColumnSumEpilogue {
    float alpha, beta;
    float* out;
    __device__ void operator()(size_t c, double sum) const {
        double v = double(alpha) * sum;
        if (beta != 0.0f) v += double(beta) * double(out[c]);
        out[c] = float(v);
    }
};

struct PenaltyEpilogue {
    double p, beta, scale, rows;
    double* kl;
    float* grad;
    __device__ void operator()(size_t c, double sum) const {
        const double mean = sum / rows;
        kl[c] = formulas::sparseness_kl(p, formulas::sparseness_clamp(mean));
        grad[c] = float(scale * beta * formulas::sparseness_kl_grad(p, mean));
    }
};

struct NormEpilogue {
    double max_norm;
    float* factor;
    __device__ void operator()(size_t c, double sum) const {
        factor[c] = float(formulas::norm_clip_factor(sum, max_norm));
    }
};

// Partial sums of m's columns into the scratch; returns the number of chunks.
template <bool Square>
size_t column_partials(const Context& ctx, ConstMatrixView m, ReduceScratch& s, double** out) {
    const ColumnReduceShape shape = column_reduce_shape(m.rows, m.cols);
    double* partial = s.partial.get_as<double>(ctx, std::max<size_t>(shape.chunks, 1) * m.cols,
                                               "column reduction partial sums");
    *out = partial;
    if (shape.chunks == 0) return 0;
    const Shape2d g = dims(shape.launch);
    column_partial_kernel<Square><<<g.grid, g.block, 0, ctx.stream>>>(m, shape.chunk_rows, partial);
    check_launch(ctx, "column_partial_kernel");
    return shape.chunks;
}

template <class Epilogue>
void column_finalize(const Context& ctx, const double* partial, size_t chunks, size_t cols,
                     Epilogue epi) {
    const Shape2d g = dims(column_finalize_shape(cols, ctx.sm_count));
    column_finalize_kernel<<<g.grid, g.block, 0, ctx.stream>>>(partial, chunks, cols, epi);
    check_launch(ctx, "column_finalize_kernel");
}

__global__ void add_column_vector_kernel(const float* v, MatrixView m) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= m.cols) return;
    const float g = v[c];
    SN_ROWS_LOOP(r, m.rows) m.data[r * m.ld + c] += g;
}

__global__ void scale_columns_kernel(const float* factor, MatrixView m) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= m.cols) return;
    const float f = factor[c];
    if (f == 1.0f) return;  // columns within the bound are not written
    SN_ROWS_LOOP(r, m.rows) m.data[r * m.ld + c] *= f;
}

__global__ void __launch_bounds__(kSumThreads)
    sum_penalty_kernel(const double* kl, size_t cols, double factor, double* loss_sum) {
    __shared__ double smem[kSumThreads / 32];
    double acc = 0.0;
    for (size_t c = threadIdx.x; c < cols; c += kSumThreads) acc += kl[c];
    acc = block_sum<kSumThreads>(acc, smem);
    if (threadIdx.x == 0) *loss_sum += factor * acc;
}

__global__ void __launch_bounds__(kRowThreads) normalize_rows_kernel(float max_norm, MatrixView m) {
    __shared__ double smem[kRowThreads / 32];
    float* row = m.data + size_t(blockIdx.x) * m.ld;
    double norm2 = 0.0;
    for (size_t j = threadIdx.x; j < m.cols; j += kRowThreads) {
        const double v = double(row[j]);
        norm2 += v * v;
    }
    norm2 = block_sum<kRowThreads>(norm2, smem);
    const double f = formulas::norm_clip_factor(norm2, double(max_norm));
    if (f == 1.0) return;
    const float ft = float(f);
    for (size_t j = threadIdx.x; j < m.cols; j += kRowThreads) row[j] *= ft;
}

// ---- row statistics (model parallelism) ----

__global__ void __launch_bounds__(kRowThreads) row_max_kernel(ConstMatrixView m, float* out) {
    __shared__ float smem[kRowThreads / 32];
    const float* row = m.data + size_t(blockIdx.x) * m.ld;
    float mx = -INFINITY;
    for (size_t j = threadIdx.x; j < m.cols; j += kRowThreads) {
        const float v = row[j];
        mx = v > mx ? v : mx;
    }
    mx = block_max<kRowThreads>(mx, smem);
    if (threadIdx.x == 0) out[blockIdx.x] = mx;
}

// The SoftMax kernel's exp and sum (cuda_elementwise.cu), with the shift given.
__global__ void __launch_bounds__(kRowThreads)
    exp_rows_kernel(const float* shift, MatrixView m, float* row_sum) {
    __shared__ double smem[kRowThreads / 32];
    float* row = m.data + size_t(blockIdx.x) * m.ld;
    const float mx = shift[blockIdx.x];
    double sum = 0.0;
    for (size_t j = threadIdx.x; j < m.cols; j += kRowThreads) {
        const float e = formulas::sn_exp(row[j] - mx);
        row[j] = e;
        sum += double(e);
    }
    sum = block_sum<kRowThreads>(sum, smem);
    if (threadIdx.x == 0) row_sum[blockIdx.x] = float(sum);
}

__global__ void __launch_bounds__(kRowThreads)
    row_sum_squares_kernel(ConstMatrixView m, float* out) {
    __shared__ double smem[kRowThreads / 32];
    const float* row = m.data + size_t(blockIdx.x) * m.ld;
    double norm2 = 0.0;
    for (size_t j = threadIdx.x; j < m.cols; j += kRowThreads) {
        const double v = double(row[j]);
        norm2 += v * v;
    }
    norm2 = block_sum<kRowThreads>(norm2, smem);
    if (threadIdx.x == 0) out[blockIdx.x] = float(norm2);
}

// Long rows (the trainer's guard sums a whole [batch, n] activation as one row of millions of
// values): one block per (segment, row), each writing its segment's sum in double, then one
// thread per row adding its segments in order. The single-block-per-row kernel above took
// 306 us for one 256 x 27,278 activation on an H100 (one SM busy), 53% of a dsstne-bench step;
// the split version takes 23 + 3 us
// (benchmarks/results/gpu/2026-11-25-h100-profile-dsstne-bench.txt).
constexpr size_t kLongRow = 65536;
constexpr size_t kRowSegment = kRowSegmentValues;  // row_segments_shape (launch_shapes.h)

__global__ void __launch_bounds__(kRowThreads)
    row_segment_squares_kernel(ConstMatrixView m, size_t segments, double* partial) {
    __shared__ double smem[kRowThreads / 32];
    const size_t r = blockIdx.y, s = blockIdx.x;
    const float* row = m.data + r * m.ld;
    const size_t j0 = s * kRowSegment;
    const size_t j1 = j0 + kRowSegment < m.cols ? j0 + kRowSegment : m.cols;
    double norm2 = 0.0;
    for (size_t j = j0 + threadIdx.x; j < j1; j += kRowThreads) {
        const double v = double(row[j]);
        norm2 += v * v;
    }
    norm2 = block_sum<kRowThreads>(norm2, smem);
    if (threadIdx.x == 0) partial[r * segments + s] = norm2;
}

// One block per row, a fixed-order block reduction of its segments (one thread adding 855
// segments in turn took 21 us).
__global__ void __launch_bounds__(kRowThreads)
    row_segments_finalize_kernel(const double* partial, size_t segments, float* out) {
    __shared__ double smem[kRowThreads / 32];
    const double* pr = partial + size_t(blockIdx.x) * segments;
    double acc = 0.0;
    for (size_t s = threadIdx.x; s < segments; s += kRowThreads) acc += pr[s];
    acc = block_sum<kRowThreads>(acc, smem);
    if (threadIdx.x == 0) out[blockIdx.x] = float(acc);
}

// Backend::sum_squares: up to kSumSquaresParts parts per launch, passed by value. Part i's chunks
// of formulas::kSumSquaresChunk elements are blocks first_chunk[i] .. first_chunk[i + 1] - 1.
// The guard's figures of a dsstne-bench step took 16 launches of row_sum_squares (89 us of an
// H100 step, benchmarks/results/gpu/2026-11-25-h100-c-profile-dsstne-bench.txt); this is two.
constexpr int kSumSquaresParts = 48;
struct SumSquaresParts {
    ConstMatrixView part[kSumSquaresParts];
    uint32_t first_chunk[kSumSquaresParts + 1];
    int count;
};

__global__ void __launch_bounds__(kRowThreads)
    sum_squares_chunks_kernel(SumSquaresParts p, double* partial) {
    __shared__ double smem[kRowThreads / 32];
    const uint32_t chunk = blockIdx.x;
    int i = 0;
    while (i + 1 < p.count && p.first_chunk[i + 1] <= chunk) ++i;
    const ConstMatrixView m = p.part[i];
    const uint64_t n = m.cols, total = uint64_t(m.rows) * n;
    const uint64_t begin = uint64_t(chunk - p.first_chunk[i]) * formulas::kSumSquaresChunk;
    const uint64_t end =
        begin + formulas::kSumSquaresChunk < total ? begin + formulas::kSumSquaresChunk : total;
    // Each thread adds elements begin + threadIdx.x, + 256, ... in that order, in double. Rows
    // of 256 columns or more: the element's (row, column) advanced by 256 at a time (at most one
    // wrap), and kSquaresInFlight elements loaded before they are added (an out-of-range slot
    // loads 0 and adds +0.0: the same sum). Why: a 64-bit division and remainder per element,
    // one load in flight, made the guard's 7.8M elements (31 MB) take 28.5 us per dsstne-bench
    // step on an H100 (2026-11-28 profile: 1.1 TB/s).
    double sum = 0.0;
    uint64_t e = begin + threadIdx.x;
    if (n >= kRowThreads && e < end) {
        uint64_t r = e / n, c = e % n;
        while (e < end) {
            float v[kSquaresInFlight];
#pragma unroll
            for (int u = 0; u < kSquaresInFlight; ++u) {
                v[u] = e < end ? m.data[r * m.ld + c] : 0.0f;
                e += kRowThreads;
                c += kRowThreads;
                if (c >= n) {
                    c -= n;
                    ++r;
                }
            }
#pragma unroll
            for (int u = 0; u < kSquaresInFlight; ++u) sum += double(v[u]) * double(v[u]);
        }
    } else {
        for (; e < end; e += kRowThreads) {
            const double v = double(m.data[(e / n) * m.ld + e % n]);
            sum += v * v;
        }
    }
    sum = block_sum<kRowThreads>(sum, smem);
    if (threadIdx.x == 0) partial[chunk] = sum;
}

// One block per part: its chunks' sums in order (block_sum's fixed tree), stored as float.
__global__ void __launch_bounds__(kRowThreads)
    sum_squares_finalize_kernel(SumSquaresParts p, const double* partial, float* out) {
    __shared__ double smem[kRowThreads / 32];
    const int i = blockIdx.x;
    double acc = 0.0;
    for (uint32_t c = p.first_chunk[i] + threadIdx.x; c < p.first_chunk[i + 1]; c += kRowThreads)
        acc += partial[c];
    acc = block_sum<kRowThreads>(acc, smem);
    if (threadIdx.x == 0) out[i] = float(acc);
}

__global__ void divide_rows_kernel(const float* divisor, MatrixView m) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= m.cols) return;
    SN_ROWS_LOOP(r, m.rows) {
        float* p = m.data + r * m.ld + c;
        *p = *p / divisor[r];
    }
}

__global__ void clip_rows_kernel(float max_norm, const float* sq_norm, MatrixView m) {
    const size_t c = SN_THIS_COLUMN();
    if (c >= m.cols) return;
    SN_ROWS_LOOP(r, m.rows) {
        const double f = formulas::norm_clip_factor(double(sq_norm[r]), double(max_norm));
        if (f == 1.0) continue;  // rows within the bound are not written
        m.data[r * m.ld + c] *= float(f);
    }
}

void check_row_grid(size_t rows, const char* op) {
    if (rows > 0x7fffffffu)
        throw Error(ErrorCategory::kInternal,
                    std::string(op) + ": too many rows for the CUDA grid");
}

}  // namespace

void launch_row_max(const Context& ctx, ConstMatrixView m, float* out) {
    if (m.rows == 0) return;
    check_row_grid(m.rows, "row_max");
    const Shape2d g = dims(row_blocks_shape(m.rows, kRowThreads));
    row_max_kernel<<<g.grid, g.block, 0, ctx.stream>>>(m, out);
    check_launch(ctx, "row_max_kernel");
}

void launch_exp_rows(const Context& ctx, const float* shift, MatrixView m, float* row_sum) {
    if (m.rows == 0) return;
    check_row_grid(m.rows, "exp_rows");
    const Shape2d g = dims(row_blocks_shape(m.rows, kRowThreads));
    exp_rows_kernel<<<g.grid, g.block, 0, ctx.stream>>>(shift, m, row_sum);
    check_launch(ctx, "exp_rows_kernel");
}

void launch_divide_rows(const Context& ctx, const float* divisor, MatrixView m) {
    if (m.rows == 0 || m.cols == 0) return;
    const Shape2d sh = dims(elementwise_shape(m.rows, m.cols));
    divide_rows_kernel<<<sh.grid, sh.block, 0, ctx.stream>>>(divisor, m);
    check_launch(ctx, "divide_rows_kernel");
}

void launch_row_sum_squares(const Context& ctx, ConstMatrixView m, float* out, ReduceScratch& s) {
    if (m.rows == 0) return;
    check_row_grid(m.rows, "row_sum_squares");
    const Shape2d rows = dims(row_blocks_shape(m.rows, kRowThreads));
    if (m.cols <= kLongRow || m.rows > 65535) {  // gridDim.y holds at most 65,535 rows
        row_sum_squares_kernel<<<rows.grid, rows.block, 0, ctx.stream>>>(m, out);
        check_launch(ctx, "row_sum_squares_kernel");
        return;
    }
    const size_t segments = (m.cols + kRowSegment - 1) / kRowSegment;
    double* partial =
        s.partial.get_as<double>(ctx, segments * m.rows, "row_sum_squares segment partial sums");
    const Shape2d seg = dims(row_segments_shape(m.rows, m.cols));  // (segments, rows)
    row_segment_squares_kernel<<<seg.grid, seg.block, 0, ctx.stream>>>(m, segments, partial);
    check_launch(ctx, "row_segment_squares_kernel");
    row_segments_finalize_kernel<<<rows.grid, rows.block, 0, ctx.stream>>>(partial, segments, out);
    check_launch(ctx, "row_segments_finalize_kernel");
}

void launch_sum_squares(const Context& ctx, const std::vector<ConstMatrixView>& parts, float* out,
                        ReduceScratch& s) {
    for (size_t first = 0; first < parts.size(); first += kSumSquaresParts) {
        SumSquaresParts p{};
        p.count = int(std::min<size_t>(kSumSquaresParts, parts.size() - first));
        uint64_t chunks = 0;
        for (int i = 0; i < p.count; ++i) {
            p.part[i] = parts[first + i];
            p.first_chunk[i] = uint32_t(chunks);
            const uint64_t total = uint64_t(p.part[i].rows) * p.part[i].cols;
            chunks += (total + formulas::kSumSquaresChunk - 1) / formulas::kSumSquaresChunk;
            if (chunks > 0x7fffffffu)
                throw Error(ErrorCategory::kInternal,
                            "sum_squares: too many elements for the grid");
        }
        p.first_chunk[p.count] = uint32_t(chunks);
        double* partial =
            chunks > 0 ? s.partial.get_as<double>(ctx, chunks, "sum_squares chunk sums") : nullptr;
        if (chunks > 0) {
            const Shape2d g = dims(sum_squares_chunks_shape(chunks));  // a block per chunk
            sum_squares_chunks_kernel<<<g.grid, g.block, 0, ctx.stream>>>(p, partial);
            check_launch(ctx, "sum_squares_chunks_kernel");
        }
        // Parts with no chunk (empty) get 0 from the finalize's empty range.
        sum_squares_finalize_kernel<<<unsigned(p.count), kRowThreads, 0, ctx.stream>>>(p, partial,
                                                                                       out + first);
        check_launch(ctx, "sum_squares_finalize_kernel");
    }
}

void launch_clip_rows(const Context& ctx, float max_norm, const float* sq_norm, MatrixView m) {
    if (m.rows == 0 || m.cols == 0) return;
    const Shape2d sh = dims(elementwise_shape(m.rows, m.cols));
    clip_rows_kernel<<<sh.grid, sh.block, 0, ctx.stream>>>(max_norm, sq_norm, m);
    check_launch(ctx, "clip_rows_kernel");
}

void launch_column_sum(const Context& ctx, ConstMatrixView m, float alpha, float beta, float* out,
                       ReduceScratch& s) {
    if (m.cols == 0) return;
    double* partial = nullptr;
    const size_t chunks = column_partials<false>(ctx, m, s, &partial);
    column_finalize(ctx, partial, chunks, m.cols, ColumnSumEpilogue{alpha, beta, out});
}

void launch_activation_backward_column_sum(const Context& ctx,
                                           const formulas::ActivationParams& act, ConstMatrixView a,
                                           const DropoutMask* mask, MatrixView d,
                                           float* column_sums, uint16_t* out16, ReduceScratch& s) {
    const size_t cols = d.cols;
    if (cols == 0) return;
    const ColumnReduceShape shape = column_reduce_shape(d.rows, cols);
    const size_t chunks = shape.chunks, chunk = shape.chunk_rows;
    double* partial = s.partial.get_as<double>(ctx, std::max<size_t>(chunks, 1) * cols,
                                               "column reduction partial sums");
    if (chunks > 0) {
        const Shape2d g = dims(shape.launch);
        if (mask != nullptr && mask->params.p > 0.0f) {
            backward_column_partial_kernel<true>
                <<<g.grid, g.block, 0, ctx.stream>>>(act, a, *mask, d, chunk, partial, out16);
        } else {
            backward_column_partial_kernel<false><<<g.grid, g.block, 0, ctx.stream>>>(
                act, a, DropoutMask{}, d, chunk, partial, out16);
        }
        check_launch(ctx, "backward_column_partial_kernel");
    }
    column_finalize(ctx, partial, chunks, cols, ColumnSumEpilogue{1.0f, 0.0f, column_sums});
}

void launch_sparseness_penalty(const Context& ctx, float p, float beta, ConstMatrixView a,
                               float scale, MatrixView delta, double* loss_sum, ReduceScratch& s) {
    const size_t rows = a.rows, n = a.cols;
    if (rows == 0 || n == 0) return;
    double* partial = nullptr;
    const size_t chunks = column_partials<false>(ctx, a, s, &partial);
    double* kl = s.column.get_as<double>(ctx, n, "sparseness penalty per-column KL");
    float* grad = s.gradient.get_as<float>(ctx, n, "sparseness penalty per-column gradient");
    column_finalize(
        ctx, partial, chunks, n,
        PenaltyEpilogue{double(p), double(beta), double(scale), double(rows), kl, grad});
    if (delta.data != nullptr) {
        const Shape2d sh = dims(elementwise_shape(delta.rows, delta.cols));
        add_column_vector_kernel<<<sh.grid, sh.block, 0, ctx.stream>>>(grad, delta);
        check_launch(ctx, "add_column_vector_kernel");
    }
    if (loss_sum != nullptr) {
        sum_penalty_kernel<<<1, kSumThreads, 0, ctx.stream>>>(kl, n, double(rows) * double(beta),
                                                              loss_sum);
        check_launch(ctx, "sum_penalty_kernel");
    }
}

void launch_normalize_rows(const Context& ctx, float max_norm, MatrixView m) {
    if (m.rows == 0 || m.cols == 0) return;
    if (m.rows > 0x7fffffffu)
        throw Error(ErrorCategory::kInternal, "normalize_rows: too many rows for the CUDA grid");
    const Shape2d g = dims(row_blocks_shape(m.rows, kRowThreads));
    normalize_rows_kernel<<<g.grid, g.block, 0, ctx.stream>>>(max_norm, m);
    check_launch(ctx, "normalize_rows_kernel");
}

void launch_normalize_columns(const Context& ctx, float max_norm, MatrixView w, ReduceScratch& s) {
    if (w.rows == 0 || w.cols == 0) return;
    double* partial = nullptr;
    const size_t chunks = column_partials<true>(ctx, w, s, &partial);
    float* factor = s.gradient.get_as<float>(ctx, w.cols, "normalize_columns factors");
    column_finalize(ctx, partial, chunks, w.cols, NormEpilogue{double(max_norm), factor});
    const Shape2d sh = dims(elementwise_shape(w.rows, w.cols));
    scale_columns_kernel<<<sh.grid, sh.block, 0, ctx.stream>>>(factor, w);
    check_launch(ctx, "scale_columns_kernel");
}

}  // namespace sparsenet::cuda
