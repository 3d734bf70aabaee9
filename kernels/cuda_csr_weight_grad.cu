// csr_weight_grad on CUDA: the compact, deterministic gradient of a sparse input layer's weights.
//
// Contract (src/backend/backend.h, CPU reference cpu::csr_weight_grad in cpu_ops_sparse.h):
//   grad.rows[0 .. *grad.count) = the sorted, unique columns the batch stores (entries dropped by
//   the noise do not count); grad.values[i, :] = alpha * sum over batch rows b storing column
//   rows[i] (value v) of v * s * dz[b, :], summed in increasing b; overwrite. *grad.count is
//   written in device memory (no host synchronisation). x: [B, in] CSR batch, dz: [B, out] (ld),
//   grad.values: [capacity, out] (ld = out). Noise as csr_matmul (formulas::keep_unit, s =
//   1/(1-p)).
//
// Two paths, chosen on the host from what it knows without a synchronisation
// (weight_grad_plan): the contract grad.capacity >= min(in, nnz) and the engine's capacity
// min(in, the largest batch's stored entries) give
//  * capacity < in (wide inputs, e.g. 10M items): the batch stores at most `capacity` entries.
//    "Sorted" path, every step proportional to B + capacity, none to `in`:
//     S1. row_length_kernel + exclusive scan over B: each batch row's first pair slot;
//     S2. pair_fill_kernel (block per batch row): slot = (column key, (b << 32) | bits of
//         alpha * v * s); dropped or out-of-range entries and unused slots get the key `in`,
//         which sorts last;
//     S3. cub::DeviceRadixSort::SortPairs over the capacity slots, on the bits of `in` only
//         (24 bits, 3 passes, for 10M items). Radix sort is stable, and the slots are in
//         increasing b, so each column's segment is in increasing batch row;
//     S4. head_kernel flags each segment's first slot, an exclusive scan numbers them, and
//         compact_heads_kernel writes grad.rows (sorted, unique) and the segment starts;
//         *count = U (<= capacity: U <= stored entries);
//     S5. segment_sum_kernel: one block per touched column (grid-striding over *count), its
//         segment staged through shared memory 256 pairs at a time, each thread summing its
//         output columns in increasing b (any segment length: no tiles).
//    It replaced, for these inputs, the dense path's flags, scan and map over all `in` rows on
//    every call (tens of MB of memory traffic per batch at 10M items, for a few thousand touched
//    rows).
//  * capacity >= in: the input is no wider than the largest batch's entries, so the dense path
//    below (flags over [in]) costs no more than the batch; it also handles a batch storing more
//    than `in` entries without knowing how many on the host (tiles of rows bound the pairs).
// Dense path steps (all enqueued on the backend's stream; the host never waits). Kernels that
// walk the batch's entries split each row into parts (entry_parts_shape: grid (rows, parts)), so
// no block waits for the batch's longest row alone.
//  1. count_columns_kernel: counts[col] = kept entries of column col (atomicAdd; order-free).
//  2. one exclusive scan over [in] of (count > 0) << 32 | count (a single block up to 32,768
//     columns, scan_shape): the high half numbers the touched columns, the low half places
//     their entries. compact_kernel writes grad.rows (increasing), the column -> compact index
//     map and *count = min(U, capacity); U > capacity is reported (Error(kInternal) at the next
//     synchronisation; the CPU throws at once) and only the first `capacity` rows are computed.
//     With one tile of rows (the usual case: dsstne-bench's 256 rows) it also writes each touched
//     column's segment (start and length) from the scan, so the tile needs no pass of its own.
//  3. Per tile of at most 1024 batch rows (more tiles only when the batch is larger, or when
//     B * in would exceed kMaxPairs entries of scratch and capacity >= in):
//     a. (several tiles) tile_count_kernel: entries per touched column in the tile, then
//        b. an exclusive scan of the counts -> segment starts;
//     c. tile_fill_kernel: each kept entry writes (batch row, alpha * v * s) into its column's
//        segment at an atomically claimed slot (the order inside a segment is not fixed yet);
//     d. tile_sum_kernel: one block (256 threads) per touched column, grid-striding over the
//        columns: the segment is loaded into shared memory and bitonic-sorted by batch row (rows
//        are unique within a segment, CSR ids being strictly increasing), then each thread sums
//        its output columns over the segment in increasing batch row, the dz values of four rows
//        loaded ahead (add_terms). The first tile writes, later tiles add: the terms of every
//        output element are added in increasing b, the CPU's order, whatever the scheduling:
//        bit-identical on every run.
// A step of dsstne-bench (256 rows, 37,000 entries, 1,024 wide, fused update) is thus 1 memset
// and 5 kernels (count, scan, compact, fill, sum) where it was 2 memsets and 12; the floor is
// the sum's traffic: 37,000 dz rows of 4 KB from L2 (150 MB at several TB/s) and each touched
// weight row read and written once (about 10,000 x 8 KB from memory): 40-50 us on an H100.
// Scratch: sorted path O(B + capacity); dense path O(in) flags/maps plus the pair buffer (a tile
// holds at most tile_rows * in entries). A caller breaking the capacity contract gets
// kStatusPairOverflow instead of a buffer overrun.
// Both paths sum every output element's terms in increasing b with the same expression: their
// results are bit-identical.
// Tolerance against the CPU: the CPU adds four terms per pass without FMA; here one FMA per term:
// within 1e-5 of the sum of |terms|.
#include <cub/device/device_radix_sort.cuh>

#include "cuda_common.cuh"
#include "cuda_row_update.cuh"
#include "formulas/rng.h"

namespace sparsenet::cuda {

namespace {

constexpr int kScanThreads = 256;
constexpr int kScanItems = 8;
static_assert(size_t(kScanThreads) * kScanItems == kScanTile, "scan_shape (launch_shapes.h)");
constexpr int kScanTotalsThreads = 1024;
constexpr int kSumThreads = 256;
constexpr int kColsPerThread = 4;      // tile_sum, segment_sum: 1024 output columns per pass
constexpr int kTermsInFlight = 4;      // batch rows whose dz values a thread loads before adding
constexpr size_t kMaxTileRows = 1024;  // segment length bound for the in-block sort
constexpr size_t kMaxPairs = size_t(16) << 20;  // pair scratch bound when capacity >= in

__device__ __forceinline__ bool kept_entry(const SparseNoise& noise, uint64_t ex,
                                           uint32_t col_offset, uint32_t col) {
    return !(noise.p > 0.0f) ||
           formulas::keep_unit(noise.seed, ex, uint64_t(col_offset) + col, noise.p);
}

// This block's entries of batch row b: part blockIdx.y of gridDim.y (entry_parts_shape).
__device__ __forceinline__ void block_entries(const CsrBatchView& x, size_t b, uint64_t* first,
                                              uint64_t* begin, uint64_t* end) {
    const uint64_t ex = example_of(x.batch, b);
    *first = x.offsets[ex];
    uint64_t lo = 0, hi = 0;
    entry_part_range(x.offsets[ex + 1] - *first, blockIdx.y, gridDim.y, &lo, &hi);
    *begin = *first + lo;
    *end = *first + hi;
}

// counts[col] = kept entries of column col in the batch (atomics: counts are order-free).
__global__ void __launch_bounds__(kEntryThreads)
    count_columns_kernel(CsrBatchView x, SparseNoise noise, uint32_t* counts,
                         DeviceStatus* status) {
    const uint64_t ex = example_of(x.batch, blockIdx.x);
    uint64_t first = 0, begin = 0, end = 0;
    block_entries(x, blockIdx.x, &first, &begin, &end);
    for (uint64_t e = begin + threadIdx.x; e < end; e += kEntryThreads) {
        const uint32_t col = x.indices[e];
        if (!kept_entry(noise, ex, x.col_offset, col)) continue;
        if (col >= x.cols) {
            report(status, kStatusColumnOutOfRange, Op::kCsrWeightGrad, col, x.cols);
            continue;
        }
        atomicAdd(counts + col, 1u);
    }
}

// ---- exclusive scan of n values into out[0..n], out[n] = total (scan_shape) ----
//
// `Load` gives value i: the scanned array as is (PlainLoad), or a column's count packed with
// its touched flag (CountLoad).

struct PlainLoad {
    const uint32_t* in;
    __device__ uint32_t operator()(size_t i) const { return in[i]; }
};
// (count > 0) << 32 | count: one scan numbers the touched columns (high half) and places their
// entries (low half). The low half does not carry: a batch in one tile stores at most
// tile_rows * in <= kMaxPairs entries that the segments hold (more is a reported overflow).
struct CountLoad {
    const uint32_t* counts;
    bool entries;  // false: the flags alone
    __device__ uint64_t operator()(size_t i) const {
        const uint32_t c = counts[i];
        return (c != 0u ? uint64_t(1) << 32 : uint64_t(0)) | (entries ? c : 0u);
    }
};

template <class T, class Load>
__global__ void __launch_bounds__(kSingleBlockScanThreads)
    scan_single_block_kernel(Load in, size_t n, T* out) {
    __shared__ T smem[kSingleBlockScanThreads / 32 + 1];
    const size_t per = (n + kSingleBlockScanThreads - 1) / kSingleBlockScanThreads;  // <= 32
    const size_t base = size_t(threadIdx.x) * per;
    const size_t stop = base + per < n ? base + per : n;
    // The values are read twice (sum, then write) rather than held: 32 uint64 values a thread
    // would spill at 1,024 threads (64 registers each); a second read hits L2.
    T sum = 0;
    for (size_t i = base; i < stop; ++i) sum += in(i);
    T total = 0;
    T running = block_exclusive_scan<kSingleBlockScanThreads>(sum, smem, &total);
    for (size_t i = base; i < stop; ++i) {
        const T v = in(i);
        out[i] = running;
        running += v;
    }
    if (threadIdx.x == 0) out[n] = total;
}

template <class T, class Load>
__global__ void __launch_bounds__(kScanThreads)
    scan_totals_kernel(Load in, size_t n, T* block_totals) {
    __shared__ T smem[kScanThreads / 32];
    const size_t base = size_t(blockIdx.x) * kScanTile + size_t(threadIdx.x) * kScanItems;
    T sum = 0;
#pragma unroll
    for (int i = 0; i < kScanItems; ++i)
        if (base + i < n) sum += in(base + i);
    sum = block_sum<kScanThreads>(sum, smem);
    if (threadIdx.x == 0) block_totals[blockIdx.x] = sum;
}

template <class T>
__global__ void __launch_bounds__(kScanTotalsThreads)
    scan_block_totals_kernel(T* block_totals, size_t blocks, T* total_out) {
    __shared__ T smem[kScanTotalsThreads / 32 + 1];
    T carry = 0;
    for (size_t base = 0; base < blocks; base += kScanTotalsThreads) {
        const size_t i = base + threadIdx.x;
        const T v = i < blocks ? block_totals[i] : T(0);
        T chunk = 0;
        const T excl = block_exclusive_scan<kScanTotalsThreads>(v, smem, &chunk);
        if (i < blocks) block_totals[i] = carry + excl;
        carry += chunk;
    }
    if (threadIdx.x == 0) *total_out = carry;
}

template <class T, class Load>
__global__ void __launch_bounds__(kScanThreads)
    scan_apply_kernel(Load in, size_t n, const T* block_offsets, T* out) {
    __shared__ T smem[kScanThreads / 32 + 1];
    const size_t base = size_t(blockIdx.x) * kScanTile + size_t(threadIdx.x) * kScanItems;
    T items[kScanItems];
    T sum = 0;
#pragma unroll
    for (int i = 0; i < kScanItems; ++i) {
        items[i] = base + i < n ? in(base + i) : T(0);
        sum += items[i];
    }
    T total = 0;
    T running = block_offsets[blockIdx.x] + block_exclusive_scan<kScanThreads>(sum, smem, &total);
#pragma unroll
    for (int i = 0; i < kScanItems; ++i) {
        if (base + i < n) out[base + i] = running;
        running += items[i];
    }
}

template <class T, class Load>
void scan_values(const Context& ctx, Load in, T* out, size_t n, ScratchBuffer& block_scratch) {
    if (n == 0) {
        check_cuda(cudaMemsetAsync(out, 0, sizeof(T), ctx.stream), "cudaMemsetAsync",
                   "clearing an empty scan");
        return;
    }
    const Shape2d g = dims(scan_shape(n));
    if (single_block_scan(n)) {
        scan_single_block_kernel<T><<<g.grid, g.block, 0, ctx.stream>>>(in, n, out);
        check_launch(ctx, "scan_single_block_kernel");
        return;
    }
    const size_t blocks = (n + kScanTile - 1) / kScanTile;
    if (blocks > 0x7fffffffu) throw Error(ErrorCategory::kInternal, "scan: too many elements");
    T* totals = block_scratch.get_as<T>(ctx, blocks, "csr_weight_grad scan totals");
    scan_totals_kernel<T><<<g.grid, g.block, 0, ctx.stream>>>(in, n, totals);
    check_launch(ctx, "scan_totals_kernel");
    scan_block_totals_kernel<T><<<1, kScanTotalsThreads, 0, ctx.stream>>>(totals, blocks, out + n);
    check_launch(ctx, "scan_block_totals_kernel");
    scan_apply_kernel<T><<<g.grid, g.block, 0, ctx.stream>>>(in, n, totals, out);
    check_launch(ctx, "scan_apply_kernel");
}

void exclusive_scan(const Context& ctx, const uint32_t* in, uint32_t* out, size_t n,
                    ScratchBuffer& block_scratch) {
    scan_values<uint32_t>(ctx, PlainLoad{in}, out, n, block_scratch);
}

// ---- compaction of the touched columns ----
//
// prefix[col] = (touched columns before col) << 32 | (their entries), prefix[in] the totals.
// Writes grad.rows and col_map; with one tile (seg_start != nullptr) also each touched column's
// segment (start, count) for tile_fill, so the tile needs no count pass and no scan of its own.
// Thread 0 writes *count = min(U, capacity) (U > capacity is reported).
__global__ void compact_kernel(const uint64_t* prefix, const uint32_t* counts, size_t in,
                               size_t capacity, uint32_t* col_map, uint32_t* rows_out,
                               uint32_t* seg_start, uint32_t* seg_count, uint32_t* count,
                               DeviceStatus* status) {
    const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (first == 0) {
        const uint64_t total = prefix[in];
        const uint32_t u = uint32_t(total >> 32);
        if (u > capacity) report(status, kStatusGradCapacity, Op::kCsrWeightGrad, u, capacity);
        *count = u < capacity ? u : uint32_t(capacity);
        if (seg_start != nullptr && u <= capacity) seg_start[u] = uint32_t(total);
    }
    for (size_t col = first; col < in; col += size_t(gridDim.x) * blockDim.x) {
        uint32_t slot = kNone;
        const uint32_t c = counts[col];
        if (c != 0u) {
            const uint64_t p = prefix[col];
            const uint32_t i = uint32_t(p >> 32);
            if (i < capacity) {
                rows_out[i] = uint32_t(col);
                slot = i;
                if (seg_start != nullptr) {
                    seg_start[i] = uint32_t(p);
                    seg_count[i] = c;
                }
            } else if (i == capacity && seg_start != nullptr) {
                seg_start[i] = uint32_t(p);  // the end of the last segment kept
            }
        }
        col_map[col] = slot;
    }
}

// ---- per tile ----

__global__ void __launch_bounds__(kEntryThreads)
    tile_count_kernel(CsrBatchView x, SparseNoise noise, const uint32_t* col_map,
                      uint32_t* seg_count, size_t b0) {
    const size_t b = b0 + blockIdx.x;
    const uint64_t ex = example_of(x.batch, b);
    uint64_t first = 0, begin = 0, end = 0;
    block_entries(x, b, &first, &begin, &end);
    for (uint64_t e = begin + threadIdx.x; e < end; e += kEntryThreads) {
        const uint32_t col = x.indices[e];
        if (col >= x.cols || !kept_entry(noise, ex, x.col_offset, col)) continue;
        const uint32_t i = col_map[col];
        if (i != kNone) atomicAdd(seg_count + i, 1u);
    }
}

__global__ void __launch_bounds__(kEntryThreads)
    tile_fill_kernel(CsrBatchView x, SparseNoise noise, float s, float alpha,
                     const uint32_t* col_map, uint32_t* seg_count, const uint32_t* seg_start,
                     size_t slots, uint32_t* pair_row, float* pair_coef, size_t pairs, size_t b0,
                     DeviceStatus* status) {
    const size_t b = b0 + blockIdx.x;
    const uint64_t ex = example_of(x.batch, b);
    uint64_t first = 0, begin = 0, end = 0;
    block_entries(x, b, &first, &begin, &end);
    const bool noisy = noise.p > 0.0f;
    for (uint64_t e = begin + threadIdx.x; e < end; e += kEntryThreads) {
        const uint32_t col = x.indices[e];
        if (col >= x.cols || !kept_entry(noise, ex, x.col_offset, col)) continue;
        const uint32_t i = col_map[col];
        if (i == kNone) continue;
        // Counts go back down to zero, so seg_count is all zero again after the tile.
        const uint32_t slot = atomicSub(seg_count + i, 1u) - 1u;
        const size_t pos = size_t(seg_start[i]) + slot;
        if (pos >= pairs) {
            report(status, kStatusPairOverflow, Op::kCsrWeightGrad, pos, pairs);
            continue;
        }
        const float v = csr_value(x, e);
        pair_row[pos] = uint32_t(b);
        pair_coef[pos] = alpha * (noisy ? v * s : v);
    }
}

// acc[k] (column c0 + threadIdx.x + k * kSumThreads) += coef[j] * dz[row[j], column] for
// j = 0 .. m-1 in increasing j, one FMA per term: the order and rounding of the one-term loop.
// The dz values of kTermsInFlight rows are loaded before they are added, so each thread has up
// to 16 loads in flight instead of one. Why: a popular column's block added up to 256 terms,
// each waiting for its load (an L2 round trip) before the next was issued: the step waited for
// that block (tile_sum_kernel 176-278 us per step in the 2026-11-28 H100 profile of dsstne-bench,
// for a few microseconds of arithmetic).
__device__ __forceinline__ void add_terms(float (&acc)[kColsPerThread], const uint32_t* row,
                                          const float* coef, size_t m, ConstMatrixView dz,
                                          size_t c0) {
    const size_t n = dz.cols;
    size_t j = 0;
    for (; j + kTermsInFlight <= m; j += kTermsInFlight) {
        float d[kTermsInFlight][kColsPerThread];
#pragma unroll
        for (int u = 0; u < kTermsInFlight; ++u) {
            const float* dzr = dz.data + size_t(row[j + u]) * dz.ld;
#pragma unroll
            for (int k = 0; k < kColsPerThread; ++k) {
                const size_t c = c0 + threadIdx.x + size_t(k) * kSumThreads;
                d[u][k] = c < n ? dzr[c] : 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < kTermsInFlight; ++u) {
            const float cf = coef[j + u];
#pragma unroll
            for (int k = 0; k < kColsPerThread; ++k) acc[k] = fmaf(cf, d[u][k], acc[k]);
        }
    }
    for (; j < m; ++j) {
        const float* dzr = dz.data + size_t(row[j]) * dz.ld;
        const float cf = coef[j];
#pragma unroll
        for (int k = 0; k < kColsPerThread; ++k) {
            const size_t c = c0 + threadIdx.x + size_t(k) * kSumThreads;
            acc[k] = fmaf(cf, c < n ? dzr[c] : 0.0f, acc[k]);
        }
    }
}

// out or the row update for the columns of add_terms' pass c0.
__device__ __forceinline__ void store_terms(const float (&acc)[kColsPerThread], float* out,
                                            size_t n, size_t c0, const RowUpdate& update,
                                            const TouchedRow& tr) {
#pragma unroll
    for (int k = 0; k < kColsPerThread; ++k) {
        const size_t c = c0 + threadIdx.x + size_t(k) * kSumThreads;
        if (c >= n) continue;
        if (update.active) {
            row_update_element(update, tr.row, c, acc[k], tr.skipped, tr.cu);
        } else {
            out[c] = acc[k];
        }
    }
}

__global__ void __launch_bounds__(kSumThreads)
    tile_sum_kernel(const uint32_t* seg_start, const uint32_t* pair_row, const float* pair_coef,
                    size_t pairs, ConstMatrixView dz, SparseRowGrad grad, bool first_tile,
                    RowUpdate update, DeviceStatus* status) {
    __shared__ uint32_t s_row[kMaxTileRows];
    __shared__ float s_coef[kMaxTileRows];
    const size_t count = *grad.count;  // already clamped to the capacity
    const size_t n = dz.cols;
    for (size_t i = blockIdx.x; i < count; i += gridDim.x) {
        const size_t start = seg_start[i];
        size_t len = size_t(seg_start[i + 1]) - start;
        if (start >= pairs) {
            len = 0;
        } else if (start + len > pairs) {
            len = pairs - start;  // only after a reported overflow
        }
        if (len > kMaxTileRows) len = kMaxTileRows;  // cannot happen: a tile has <= 1024 rows
        if (len == 0 && !first_tile) continue;       // nothing to add (uniform in the block)
        // sparse_step (one tile): weight row grad.rows[i] is updated with the sums.
        const TouchedRow tr = touched_row(update, grad, i, status);
        if (!tr.ok) continue;  // uniform in the block
        size_t padded = 1;
        while (padded < len) padded <<= 1;
        for (size_t j = threadIdx.x; j < padded; j += kSumThreads) {
            s_row[j] = j < len ? pair_row[start + j] : kNone;
            s_coef[j] = j < len ? pair_coef[start + j] : 0.0f;
        }
        __syncthreads();
        // Bitonic sort by batch row (ascending; padding kNone sorts last).
        for (size_t k = 2; k <= padded; k <<= 1) {
            for (size_t j = k >> 1; j > 0; j >>= 1) {
                for (size_t t = threadIdx.x; t < padded; t += kSumThreads) {
                    const size_t u = t ^ j;
                    if (u > t) {
                        const uint32_t rt = s_row[t], ru = s_row[u];
                        const bool ascending = (t & k) == 0;
                        if ((rt > ru) == ascending) {
                            s_row[t] = ru;
                            s_row[u] = rt;
                            const float ct = s_coef[t];
                            s_coef[t] = s_coef[u];
                            s_coef[u] = ct;
                        }
                    }
                }
                __syncthreads();
            }
        }
        float* out = grad.values + i * n;
        for (size_t c0 = 0; c0 < n; c0 += size_t(kSumThreads) * kColsPerThread) {
            float acc[kColsPerThread];
#pragma unroll
            for (int k = 0; k < kColsPerThread; ++k) {
                const size_t c = c0 + threadIdx.x + size_t(k) * kSumThreads;
                acc[k] = first_tile || c >= n ? 0.0f : out[c];
            }
            add_terms(acc, s_row, s_coef, len, dz, c0);
            store_terms(acc, out, n, c0, update, tr);
        }
        __syncthreads();  // shared memory is reused by the next column; the clock was read
        if (update.active) row_update_done(update, tr.row);
    }
}

// `work` items, `per_block` per block of `threads`, at most blocks_per_sm blocks per SM:
// grid_stride_shape (launch_shapes.h) as dim3s.
Shape2d grid_for(const Context& ctx, size_t work, size_t per_block, unsigned threads,
                 size_t blocks_per_sm) {
    return dims(grid_stride_shape(work, per_block, threads, blocks_per_sm, ctx.sm_count));
}

// ---- the sorted path (capacity < in) ----

__global__ void row_length_kernel(CsrBatchView x, size_t rows, uint32_t* length) {
    for (size_t b = size_t(blockIdx.x) * blockDim.x + threadIdx.x; b < rows;
         b += size_t(gridDim.x) * blockDim.x) {
        const uint64_t ex = example_of(x.batch, b);
        const uint64_t len = x.offsets[ex + 1] - x.offsets[ex];
        length[b] = len > 0xffffffffu ? 0xffffffffu : uint32_t(len);
    }
}

__global__ void fill_keys_kernel(uint32_t* keys, size_t n, uint32_t value) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x)
        keys[i] = value;
}

__global__ void __launch_bounds__(kEntryThreads)
    pair_fill_kernel(CsrBatchView x, SparseNoise noise, float s, float alpha,
                     const uint32_t* row_start, size_t rows, uint32_t* keys, uint64_t* pairs,
                     size_t slots, DeviceStatus* status) {
    const size_t b = blockIdx.x;
    const uint64_t ex = example_of(x.batch, b);
    uint64_t first = 0, begin = 0, end = 0;
    block_entries(x, b, &first, &begin, &end);
    const bool noisy = noise.p > 0.0f;
    const uint32_t none = x.cols;  // sorts after every column id
    for (uint64_t e = begin + threadIdx.x; e < end; e += kEntryThreads) {
        const size_t slot = size_t(row_start[b]) + size_t(e - first);
        if (slot >= slots) {
            report(status, kStatusPairOverflow, Op::kCsrWeightGrad, row_start[rows], slots);
            continue;
        }
        const uint32_t col = x.indices[e];
        bool keep = kept_entry(noise, ex, x.col_offset, col);
        if (keep && col >= x.cols) {
            report(status, kStatusColumnOutOfRange, Op::kCsrWeightGrad, col, x.cols);
            keep = false;
        }
        const float v = csr_value(x, e);
        const float coef = alpha * (noisy ? v * s : v);
        keys[slot] = keep ? col : none;
        pairs[slot] = (uint64_t(b) << 32) | uint64_t(__float_as_uint(coef));
    }
}

// heads[i] = 1 where a segment of a real column starts; *valid = the number of real slots.
__global__ void head_kernel(const uint32_t* keys, size_t n, uint32_t none, uint32_t* heads,
                            uint32_t* valid) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        const uint32_t k = keys[i];
        const bool real = k != none;
        heads[i] = real && (i == 0 || keys[i - 1] != k) ? 1u : 0u;
        if (real && (i + 1 == n || keys[i + 1] == none)) *valid = uint32_t(i + 1);
    }
}

__global__ void compact_heads_kernel(const uint32_t* keys, const uint32_t* heads,
                                     const uint32_t* head_pos, size_t n, uint32_t* rows_out,
                                     uint32_t* seg_start) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        if (heads[i] == 0u) continue;
        const uint32_t u = head_pos[i];
        rows_out[u] = keys[i];
        seg_start[u] = uint32_t(i);
    }
}

__global__ void finish_sorted_kernel(const uint32_t* unique_total, const uint32_t* valid,
                                     uint32_t* seg_start, uint32_t* count) {
    const uint32_t u = *unique_total;  // <= the real slots <= capacity
    seg_start[u] = *valid;
    *count = u;
}

__global__ void __launch_bounds__(kSumThreads)
    segment_sum_kernel(const uint32_t* seg_start, const uint64_t* pairs, ConstMatrixView dz,
                       SparseRowGrad grad, RowUpdate update, DeviceStatus* status) {
    __shared__ uint32_t s_row[kSumThreads];
    __shared__ float s_coef[kSumThreads];
    const size_t count = *grad.count;
    const size_t n = dz.cols;
    for (size_t i = blockIdx.x; i < count; i += gridDim.x) {
        const size_t start = seg_start[i], stop = seg_start[i + 1];
        float* out = grad.values + i * n;
        // sparse_step: weight row grad.rows[i] is updated with the sums.
        const TouchedRow tr = touched_row(update, grad, i, status);
        if (!tr.ok) continue;  // uniform in the block
        // Each thread keeps its columns' sums in registers across the staged chunks: at most
        // kColsPerThread per pass over the columns, more passes for wider layers.
        for (size_t c0 = 0; c0 < n; c0 += size_t(kSumThreads) * kColsPerThread) {
            float acc[kColsPerThread];
#pragma unroll
            for (int k = 0; k < kColsPerThread; ++k) acc[k] = 0.0f;
            for (size_t base = start; base < stop; base += kSumThreads) {
                const size_t j = base + threadIdx.x;
                if (j < stop) {
                    const uint64_t p = pairs[j];
                    s_row[threadIdx.x] = uint32_t(p >> 32);
                    s_coef[threadIdx.x] = __uint_as_float(uint32_t(p));
                }
                __syncthreads();
                const size_t m = stop - base < size_t(kSumThreads) ? stop - base : kSumThreads;
                add_terms(acc, s_row, s_coef, m, dz, c0);
                __syncthreads();
            }
            store_terms(acc, out, n, c0, update, tr);
        }
        if (update.active) {
            __syncthreads();  // every thread read the clock
            row_update_done(update, tr.row);
        }
    }
}

void launch_sorted(const Context& ctx, const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                   float alpha, const SparseRowGrad& grad, WeightGradScratch& s,
                   const WeightGradPlan& plan, const RowUpdate& update) {
    const size_t rows = dz.rows, n = dz.cols, slots = plan.pairs;
    const float ns = noise.p > 0.0f ? 1.0f / (1.0f - noise.p) : 1.0f;
    const uint32_t none = x.cols;
    uint32_t* row_len = s.touched.get_as<uint32_t>(ctx, rows, "csr_weight_grad row lengths");
    uint32_t* row_start = s.positions.get_as<uint32_t>(ctx, rows + 1, "csr_weight_grad row starts");
    uint32_t* keys = s.sort_keys[0].get_as<uint32_t>(ctx, slots, "csr_weight_grad keys");
    uint32_t* keys_sorted =
        s.sort_keys[1].get_as<uint32_t>(ctx, slots, "csr_weight_grad sorted keys");
    uint64_t* pairs = s.sort_pairs[0].get_as<uint64_t>(ctx, slots, "csr_weight_grad pairs");
    uint64_t* pairs_sorted =
        s.sort_pairs[1].get_as<uint64_t>(ctx, slots, "csr_weight_grad sorted pairs");
    uint32_t* heads = s.col_map.get_as<uint32_t>(ctx, slots, "csr_weight_grad segment heads");
    uint32_t* head_pos =
        s.seg_count.get_as<uint32_t>(ctx, slots + 1, "csr_weight_grad segment numbers");
    uint32_t* seg_start =
        s.seg_start.get_as<uint32_t>(ctx, slots + 2, "csr_weight_grad segment starts");
    uint32_t* valid = seg_start + slots + 1;  // the number of real slots (head_kernel)

    // S1-S2.
    // Batch rows and pair slots: 256 per block (32 blocks per SM at most, grid-striding).
    const Shape2d per_row = grid_for(ctx, rows, 256, 256, 32);
    const Shape2d per_slot = grid_for(ctx, slots, 256, 256, 32);
    row_length_kernel<<<per_row.grid, per_row.block, 0, ctx.stream>>>(x, rows, row_len);
    check_launch(ctx, "row_length_kernel");
    exclusive_scan(ctx, row_len, row_start, rows, s.scan_block);
    fill_keys_kernel<<<per_slot.grid, per_slot.block, 0, ctx.stream>>>(keys, slots, none);
    check_launch(ctx, "fill_keys_kernel");
    const Shape2d entries = dims(entry_parts_shape(rows, entry_parts(rows, ctx.sm_count)));
    pair_fill_kernel<<<entries.grid, entries.block, 0, ctx.stream>>>(
        x, noise, ns, alpha, row_start, rows, keys, pairs, slots, ctx.status);
    check_launch(ctx, "pair_fill_kernel");

    // S3: sort on the bits that can be set (`none` = in included).
    const int end_bit = 32 - __builtin_clz(none | 1u);
    size_t temp_bytes = 0;
    check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, keys_sorted, pairs,
                                               pairs_sorted, int(slots), 0, end_bit, ctx.stream),
               "cub::DeviceRadixSort::SortPairs", "sizing the csr_weight_grad sort");
    void* temp = s.sort_temp.get(ctx, temp_bytes, "csr_weight_grad sort temporary storage");
    check_cuda(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, keys_sorted, pairs,
                                               pairs_sorted, int(slots), 0, end_bit, ctx.stream),
               "cub::DeviceRadixSort::SortPairs", "sorting the csr_weight_grad entries");
    check_launch(ctx, "cub::DeviceRadixSort::SortPairs");

    // S4.
    check_cuda(cudaMemsetAsync(valid, 0, sizeof(uint32_t), ctx.stream), "cudaMemsetAsync",
               "clearing the csr_weight_grad slot count");
    head_kernel<<<per_slot.grid, per_slot.block, 0, ctx.stream>>>(keys_sorted, slots, none, heads,
                                                                  valid);
    check_launch(ctx, "head_kernel");
    exclusive_scan(ctx, heads, head_pos, slots, s.scan_block);
    compact_heads_kernel<<<per_slot.grid, per_slot.block, 0, ctx.stream>>>(
        keys_sorted, heads, head_pos, slots, grad.rows, seg_start);
    check_launch(ctx, "compact_heads_kernel");
    finish_sorted_kernel<<<1, 1, 0, ctx.stream>>>(head_pos + slots, valid, seg_start, grad.count);
    check_launch(ctx, "finish_sorted_kernel");

    // S5.
    if (n == 0) return;
    const Shape2d per_column = grid_for(ctx, slots, 1, kSumThreads, 8);  // a column per block
    segment_sum_kernel<<<per_column.grid, per_column.block, 0, ctx.stream>>>(
        seg_start, pairs_sorted, dz, grad, update, ctx.status);
    check_launch(ctx, "segment_sum_kernel");
}

}  // namespace

WeightGradPlan weight_grad_plan(size_t rows, size_t in, size_t capacity) {
    WeightGradPlan p;
    if (rows == 0) return p;
    if (capacity < in) {
        p.sorted = true;
        p.pairs = capacity;  // the contract: the batch stores at most `capacity` entries
        p.work = rows + capacity;
        return p;
    }
    size_t tile_rows = std::min(rows, kMaxTileRows);
    tile_rows = std::min(tile_rows, std::max<size_t>(1, kMaxPairs / std::max<size_t>(in, 1)));
    p.pairs = tile_rows * in;
    p.tile_rows = tile_rows;
    p.work = in + p.pairs;
    return p;
}

bool sparse_step_fusable(size_t rows, size_t in, size_t capacity) {
    const WeightGradPlan plan = weight_grad_plan(rows, in, capacity);
    return plan.sorted || rows <= plan.tile_rows;  // one sum per touched row: no later tile adds
}

void launch_csr_weight_grad(const Context& ctx, const CsrBatchView& x, SparseNoise noise,
                            ConstMatrixView dz, float alpha, const SparseRowGrad& grad,
                            WeightGradScratch& s, const RowUpdate& update) {
    const size_t rows = dz.rows, n = dz.cols, in = x.cols;
    check_cuda(cudaMemsetAsync(grad.count, 0, sizeof(uint32_t), ctx.stream), "cudaMemsetAsync",
               "clearing the csr_weight_grad row count");
    if (rows == 0) return;
    if (rows > 0x7fffffffu)
        throw Error(ErrorCategory::kInternal, "csr_weight_grad: batch exceeds the CUDA grid");
    const WeightGradPlan plan = weight_grad_plan(rows, in, grad.capacity);
    if (plan.sorted) {
        if (plan.pairs > 0x7fffffffu) {
            throw Error(ErrorCategory::kInternal,
                        "csr_weight_grad: gradient capacity exceeds the device sort's range");
        }
        if (plan.pairs == 0) return;  // capacity 0 < in: nothing can be kept (count stays 0)
        launch_sorted(ctx, x, noise, dz, alpha, grad, s, plan, update);
        return;
    }
    const bool noisy = noise.p > 0.0f;
    const float ns = noisy ? 1.0f / (1.0f - noise.p) : 1.0f;
    const size_t in1 = in > 0 ? in : 1;
    const size_t slots = std::min(grad.capacity, in);  // bound on the touched columns kept
    // One tile of rows (dsstne-bench: 256 rows <= 615): the batch's column counts are the tile's,
    // so the compaction also lays out the tile's segments.
    const bool one_tile = rows <= plan.tile_rows;
    const bool segments = one_tile && n > 0 && slots > 0;
    uint32_t* counts = s.touched.get_as<uint32_t>(ctx, in1, "csr_weight_grad column counts");
    uint64_t* prefix = s.positions.get_as<uint64_t>(ctx, in + 1, "csr_weight_grad column prefix");
    uint32_t* col_map = s.col_map.get_as<uint32_t>(ctx, in1, "csr_weight_grad column map");
    uint32_t* seg_count =
        slots > 0 ? s.seg_count.get_as<uint32_t>(ctx, slots, "csr_weight_grad counts") : nullptr;
    uint32_t* seg_start =
        slots > 0 ? s.seg_start.get_as<uint32_t>(ctx, slots + 1, "csr_weight_grad starts")
                  : nullptr;
    check_cuda(cudaMemsetAsync(counts, 0, in1 * sizeof(uint32_t), ctx.stream), "cudaMemsetAsync",
               "clearing the csr_weight_grad column counts");

    // 1-2: the touched columns, sorted, their compact indices (and with one tile their segments).
    const int parts = entry_parts(rows, ctx.sm_count);
    const Shape2d entries = dims(entry_parts_shape(rows, parts));
    count_columns_kernel<<<entries.grid, entries.block, 0, ctx.stream>>>(x, noise, counts,
                                                                         ctx.status);
    check_launch(ctx, "count_columns_kernel");
    // Several tiles: only the flags are scanned (the batch's entries could carry into them).
    scan_values<uint64_t>(ctx, CountLoad{counts, one_tile}, prefix, in, s.scan_block);
    if (in > 0) {
        const Shape2d per_input = grid_for(ctx, in, 256, 256, 32);
        compact_kernel<<<per_input.grid, per_input.block, 0, ctx.stream>>>(
            prefix, counts, in, grad.capacity, col_map, grad.rows, segments ? seg_start : nullptr,
            segments ? seg_count : nullptr, grad.count, ctx.status);
        check_launch(ctx, "compact_kernel");
    }
    if (n == 0 || slots == 0) return;

    // 3: tiles of batch rows (capacity >= in here: the sorted path takes capacity < in).
    const size_t tile_rows = plan.tile_rows;
    const size_t pairs = plan.pairs;
    uint32_t* pair_row = s.pair_row.get_as<uint32_t>(ctx, pairs, "csr_weight_grad pair rows");
    float* pair_coef = s.pair_coef.get_as<float>(ctx, pairs, "csr_weight_grad pair coefficients");
    if (!one_tile) {
        check_cuda(cudaMemsetAsync(seg_count, 0, slots * sizeof(uint32_t), ctx.stream),
                   "cudaMemsetAsync", "clearing the csr_weight_grad counts");
    }
    const Shape2d per_column = grid_for(ctx, slots, 1, kSumThreads, 8);  // a column per block
    if (update.active && !one_tile) {
        throw Error(ErrorCategory::kInternal, "sparse_step: fused over several tiles of rows");
    }
    for (size_t b0 = 0; b0 < rows; b0 += tile_rows) {
        const Shape2d tile =
            dims(entry_parts_shape(std::min(tile_rows, rows - b0), parts));  // (rows, parts)
        if (!one_tile) {
            tile_count_kernel<<<tile.grid, tile.block, 0, ctx.stream>>>(x, noise, col_map,
                                                                        seg_count, b0);
            check_launch(ctx, "tile_count_kernel");
            exclusive_scan(ctx, seg_count, seg_start, slots, s.scan_block);
        }
        tile_fill_kernel<<<tile.grid, tile.block, 0, ctx.stream>>>(
            x, noise, ns, alpha, col_map, seg_count, seg_start, slots, pair_row, pair_coef, pairs,
            b0, ctx.status);
        check_launch(ctx, "tile_fill_kernel");
        tile_sum_kernel<<<per_column.grid, per_column.block, 0, ctx.stream>>>(
            seg_start, pair_row, pair_coef, pairs, dz, grad, b0 == 0, update, ctx.status);
        check_launch(ctx, "tile_sum_kernel");
    }
}

}  // namespace sparsenet::cuda
