// csr_matmul on CUDA: the sparse input layer ("embedding bag"), a gather-sum of weight rows.
//
// Contract (src/backend/backend.h, CPU reference cpu::csr_matmul in cpu_ops_sparse.h):
//   z[b, :] = beta * z[b, :] + sum over the kept stored entries (j, v) of batch row b of
//             v * s * w[j, :]
// x: [B, in] CSR batch (u64 offsets, u32 column ids, optional float values); w: [in, out] with
// out contiguous (ld); z: [B, out] (ld). beta == 0 overwrites z (NaNs included). With
// noise.p > 0 an entry is kept iff formulas::keep_unit(noise.seed, example(b), col_offset + j, p)
// (the CPU's hash) and s = 1 / (1 - p); otherwise s = 1.
//
// Thread mapping, chosen by the output width n (launch_csr_matmul):
//  * n > 128, "slices" (DSSTNE's kCalculateSparseZ): grid.x = batch rows, grid.y = slices of
//    kColsPerBlock = 512 output columns; a block of 128 threads owns one slice of one row, each
//    thread 4 columns (c, c + 128, c + 256, c + 384), so every weight-row read is coalesced. The
//    row's entries are staged through shared memory 128 at a time (column id, or UINT32_MAX when
//    the noise dropped it, and the coefficient), drawing each mask bit once per block.
//  * n <= 128, "groups": one group of G lanes per batch row, G = 32 for 32 < n <= 128 (each lane
//    K = 2 or 4 columns: lane, lane + 32, ...), else G = the power of two >= n (1 to 32, each lane
//    one column); 128 / G rows per block of 128 threads. The group reads G entries of its row at
//    a time (one per lane) and broadcasts them with __shfl_sync inside the group. The slice
//    mapping gave such a layer one block of 128 threads per row with at most n of them busy (a
//    16-wide layer: 1 in 8 threads); here at most G - n lanes of a group idle (none for n a power
//    of two >= 1, at most half otherwise), and a block covers 128 / G rows.
// Both mappings add a row's entries in the same order with the same expression, so their results
// are bit-identical.
//
// Parts (slices only): one block per batch row and slice walks the whole row, so the longest rows
// set the time. dsstne-bench's batches of 256 rows (mean 144 entries, the longest above 2,000)
// took 340 us (131-668) at 24 % occupancy on an H100, against about 30 us of weight-row reads
// at its bandwidth (benchmarks/results/gpu/2026-11-25-h100-c-profile-dsstne-bench.txt). With
// `parts` > 1 (csr_matmul_parts: enough blocks for every SM) grid.z splits each row's entries
// into that many contiguous ranges; each block sums its range into partial [parts, B, out] and
// csr_matmul_combine_kernel adds beta * z and the parts in part order: deterministic, rounded
// differently from one pass (within the same tolerance of the CPU).
//
// Accumulation: registers start at beta * z (or 0) and add the entries in CSR order with fused
// multiply-adds; overwrite semantics. Deterministic (no atomics). The CPU adds four entries per
// pass without FMA, so results differ in rounding only: within 1e-5 of the sum of |terms|.
// A column id >= in is skipped and reported (Error(kInternal) at the next synchronisation).
#include <algorithm>
#include <cstdlib>

#include "cuda_common.cuh"
#include "formulas/rng.h"

namespace sparsenet::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kColsPerThread = 4;
constexpr size_t kColsPerBlock = size_t(kThreads) * kColsPerThread;
static_assert(kThreads == int(kCsrMatmulThreads) && kColsPerBlock == kCsrMatmulSliceCols,
              "csr_matmul_shape (launch_shapes.h) describes these blocks");
constexpr int kUnroll = 8;  // entries whose weight rows a thread loads before adding them

// partial: [gridDim.z, z.rows, z.cols] when gridDim.z > 1 (parts), else unused.
__global__ void __launch_bounds__(kThreads)
    csr_matmul_kernel(CsrBatchView x, SparseNoise noise, float s, ConstMatrixView w, MatrixView z,
                      float beta, float* partial, DeviceStatus* status) {
    __shared__ uint32_t s_col[kThreads];
    __shared__ float s_coef[kThreads];
    const size_t b = blockIdx.x;
    const size_t n = z.cols;
    const size_t c0 = size_t(blockIdx.y) * kColsPerBlock + threadIdx.x;
    const uint64_t ex = example_of(x.batch, b);
    const uint64_t row_begin = x.offsets[ex], len = x.offsets[ex + 1] - row_begin;
    // This block's part of the row's entries (the whole row with one part).
    const uint64_t begin = row_begin + len * blockIdx.z / gridDim.z;
    const uint64_t end = row_begin + len * (blockIdx.z + 1) / gridDim.z;
    const bool noisy = noise.p > 0.0f;
    const bool parts = gridDim.z > 1;
    if (parts) beta = 0.0f;  // the combining pass applies it
    float* zr = parts ? partial + (size_t(blockIdx.z) * z.rows + b) * n : z.data + b * z.ld;

    float acc[kColsPerThread];
#pragma unroll
    for (int k = 0; k < kColsPerThread; ++k) {
        const size_t c = c0 + size_t(k) * kThreads;
        acc[k] = 0.0f;
        if (c < n && beta != 0.0f) acc[k] = beta == 1.0f ? zr[c] : beta * zr[c];
    }

    for (uint64_t base = begin; base < end; base += kThreads) {
        const uint64_t e = base + threadIdx.x;
        if (e < end) {
            const uint32_t col = x.indices[e];
            const float v = csr_value(x, e);
            bool keep = !noisy ||
                        formulas::keep_unit(noise.seed, ex, uint64_t(x.col_offset) + col, noise.p);
            if (keep && col >= x.cols) {
                report(status, kStatusColumnOutOfRange, Op::kCsrMatmul, col, x.cols);
                keep = false;
            }
            s_col[threadIdx.x] = keep ? col : kNone;
            s_coef[threadIdx.x] = noisy ? v * s : v;
        }
        __syncthreads();
        const int m = int(end - base < uint64_t(kThreads) ? end - base : uint64_t(kThreads));
        // kUnroll entries at a time: their weight loads first (all in flight together), then
        // the adds in CSR order (the same sum, bit for bit). One entry at a time left each warp
        // waiting on one row's loads: 939 us for a 256 x 27,278 -> 1024 batch on an H100,
        // 160 GB/s (benchmarks/results/gpu/2026-11-25-h100-profile-dsstne-bench.txt).
        int i = 0;
        for (; i + kUnroll <= m; i += kUnroll) {
            float wv[kUnroll][kColsPerThread];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const uint32_t col = s_col[i + u];
                const float* wr = w.data + size_t(col == kNone ? 0 : col) * w.ld;
#pragma unroll
                for (int k = 0; k < kColsPerThread; ++k) {
                    const size_t c = c0 + size_t(k) * kThreads;
                    wv[u][k] = (col != kNone && c < n) ? __ldg(wr + c) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                if (s_col[i + u] == kNone) continue;
                const float cf = s_coef[i + u];
#pragma unroll
                for (int k = 0; k < kColsPerThread; ++k) acc[k] += cf * wv[u][k];
            }
        }
        for (; i < m; ++i) {
            const uint32_t col = s_col[i];
            if (col == kNone) continue;
            const float cf = s_coef[i];
            const float* wr = w.data + size_t(col) * w.ld;
#pragma unroll
            for (int k = 0; k < kColsPerThread; ++k) {
                const size_t c = c0 + size_t(k) * kThreads;
                if (c < n) acc[k] += cf * wr[c];
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int k = 0; k < kColsPerThread; ++k) {
        const size_t c = c0 + size_t(k) * kThreads;
        if (c < n) zr[c] = acc[k];
    }
}

// The "groups" mapping (n <= G * K <= 128): G lanes per batch row, K columns per lane.
template <int G, int K>
__global__ void __launch_bounds__(kThreads)
    csr_matmul_groups_kernel(CsrBatchView x, SparseNoise noise, float s, ConstMatrixView w,
                             MatrixView z, float beta, size_t rows, DeviceStatus* status) {
    static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0 && K >= 1 && G * K <= 128);
    const int lane = int(threadIdx.x % G);
    const size_t b = size_t(blockIdx.x) * (kThreads / G) + threadIdx.x / G;
    // The lanes of this group (the shuffles name only them: other groups of the warp run rows of
    // other lengths).
    const int warp_lane = int(threadIdx.x % 32);
    const unsigned group_mask =
        G == 32 ? 0xffffffffu : ((1u << G) - 1u) << unsigned(warp_lane - warp_lane % G);
    if (b >= rows) return;  // the whole group leaves together
    const size_t n = z.cols;
    const uint64_t ex = example_of(x.batch, b);
    const uint64_t begin = x.offsets[ex], end = x.offsets[ex + 1];
    const bool noisy = noise.p > 0.0f;
    float* zr = z.data + b * z.ld;

    float acc[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const size_t c = size_t(lane) + size_t(k) * G;
        acc[k] = 0.0f;
        if (c < n && beta != 0.0f) acc[k] = beta == 1.0f ? zr[c] : beta * zr[c];
    }
    for (uint64_t base = begin; base < end; base += G) {
        const uint64_t e = base + uint64_t(lane);
        uint32_t mine = kNone;
        float mine_coef = 0.0f;
        if (e < end) {
            const uint32_t col = x.indices[e];
            const float v = csr_value(x, e);
            bool keep = !noisy ||
                        formulas::keep_unit(noise.seed, ex, uint64_t(x.col_offset) + col, noise.p);
            if (keep && col >= x.cols) {
                report(status, kStatusColumnOutOfRange, Op::kCsrMatmul, col, x.cols);
                keep = false;
            }
            mine = keep ? col : kNone;
            mine_coef = noisy ? v * s : v;
        }
        const int m = int(end - base < uint64_t(G) ? end - base : uint64_t(G));
        for (int i = 0; i < m; ++i) {
            const uint32_t col = __shfl_sync(group_mask, mine, i, G);
            const float cf = __shfl_sync(group_mask, mine_coef, i, G);
            if (col == kNone) continue;
            const float* wr = w.data + size_t(col) * w.ld;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const size_t c = size_t(lane) + size_t(k) * G;
                if (c < n) acc[k] += cf * wr[c];
            }
        }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const size_t c = size_t(lane) + size_t(k) * G;
        if (c < n) zr[c] = acc[k];
    }
}

// z = beta * z + the parts in order, element by element (grid-striding over [rows, n]).
__global__ void csr_matmul_combine_kernel(const float* partial, int parts, MatrixView z,
                                          float beta) {
    const size_t n = z.cols, total = z.rows * n;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += size_t(gridDim.x) * blockDim.x) {
        const size_t b = i / n, c = i % n;
        float* zp = z.data + b * z.ld + c;
        float acc = beta == 0.0f ? 0.0f : beta == 1.0f ? *zp : beta * *zp;
        for (int k = 0; k < parts; ++k) acc += partial[(size_t(k) * z.rows + b) * n + c];
        *zp = acc;
    }
}

template <int G, int K>
void launch_groups(const Context& ctx, const CsrBatchView& x, SparseNoise noise, float s,
                   ConstMatrixView w, MatrixView z, float beta) {
    // [B, n <= 128]: 128 / G batch rows per block of 128 threads.
    const Shape2d g = dims(csr_matmul_shape(z.rows, z.cols, 1));
    csr_matmul_groups_kernel<G, K>
        <<<g.grid, g.block, 0, ctx.stream>>>(x, noise, s, w, z, beta, z.rows, ctx.status);
    check_launch(ctx, "csr_matmul_groups_kernel");
}

}  // namespace

void launch_csr_matmul(const Context& ctx, const CsrBatchView& x, SparseNoise noise,
                       ConstMatrixView w, MatrixView z, float beta, ScratchBuffer& partial) {
    const size_t rows = z.rows, n = z.cols;
    if (rows == 0 || n == 0) return;
    const size_t slices = (n + kColsPerBlock - 1) / kColsPerBlock;
    if (rows > 0x7fffffffu || slices > 65535) {
        throw Error(ErrorCategory::kInternal, "csr_matmul: batch of " + std::to_string(rows) +
                                                  " rows x " + std::to_string(n) +
                                                  " columns exceeds the CUDA grid limits");
    }
    const float s = noise.p > 0.0f ? 1.0f / (1.0f - noise.p) : 1.0f;
    const CsrMatmulMapping m = csr_matmul_mapping(n);
    switch (m.lanes * 8 + m.cols_per_lane) {  // lanes <= 32, cols_per_lane <= 4: unique
        case 1 * 8 + 1:
            return launch_groups<1, 1>(ctx, x, noise, s, w, z, beta);
        case 2 * 8 + 1:
            return launch_groups<2, 1>(ctx, x, noise, s, w, z, beta);
        case 4 * 8 + 1:
            return launch_groups<4, 1>(ctx, x, noise, s, w, z, beta);
        case 8 * 8 + 1:
            return launch_groups<8, 1>(ctx, x, noise, s, w, z, beta);
        case 16 * 8 + 1:
            return launch_groups<16, 1>(ctx, x, noise, s, w, z, beta);
        case 32 * 8 + 1:
            return launch_groups<32, 1>(ctx, x, noise, s, w, z, beta);
        case 32 * 8 + 2:
            return launch_groups<32, 2>(ctx, x, noise, s, w, z, beta);
        case 32 * 8 + 4:
            return launch_groups<32, 4>(ctx, x, noise, s, w, z, beta);
        default:
            break;  // n > 128: slices
    }
    const int parts =
        csr_matmul_parts(rows, slices, ctx.sm_count, std::getenv("SPARSENET_CSR_MATMUL_PARTS"));
    float* sums =
        parts > 1 ? partial.get_as<float>(ctx, size_t(parts) * rows * n, "csr_matmul partial sums")
                  : nullptr;
    // [B, n > 128]: grid (B, ceil(n / 512), parts), 128 threads of 4 columns.
    const Shape2d g = dims(csr_matmul_shape(rows, n, parts));
    csr_matmul_kernel<<<g.grid, g.block, 0, ctx.stream>>>(x, noise, s, w, z, beta, sums,
                                                          ctx.status);
    check_launch(ctx, "csr_matmul_kernel");
    if (parts == 1) return;
    const Shape2d c = dims(csr_matmul_combine_shape(rows, n, ctx.sm_count));
    csr_matmul_combine_kernel<<<c.grid, c.block, 0, ctx.stream>>>(sums, parts, z, beta);
    check_launch(ctx, "csr_matmul_combine_kernel");
}

}  // namespace sparsenet::cuda
