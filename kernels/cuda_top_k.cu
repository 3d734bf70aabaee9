// top_k on CUDA: per row, the k best (score, column) pairs with sparse exclusions.
//
// Contract (src/backend/backend.h, CPU reference cpu::top_k in cpu_ops_sparse.h): scores:
// [B, n] (ld); out_scores, out_indices: [B, k] (ld = k). Per row: the k largest scores in
// descending order, ties to the lower column; columns stored in that row of `exclude` and NaN
// scores are skipped; slots beyond the usable columns get -inf and UINT32_MAX. Any k >= 1,
// including k > n. -0 and +0 tie (as the CPU's comparisons), and the score written is the
// stored one, bit for bit.
//
// Keys: a usable entry becomes the 64-bit key (ordered float bits << 32) | ~column, so that a
// larger key is exactly "ranks before" (higher score, then lower column) and every key of a row
// is distinct; 0 is below every real key and marks an empty slot.
//
// Steps, per chunk of rows (chunks bound the scratch to kMaxKeys keys):
//  1. With an exclusion list: a bitmap [rows, ceil(n/32)] (memset, then one atomicOr per stored
//     exclusion; OR is order-free).
//  2. select_kernel, one block of 512 threads per row: a radix select over the 32-bit ordered
//     score (four passes of 8 bits, shared-memory histograms) finds the m-th largest score T,
//     m = min(k, usable entries), and how many of the entries equal to T are needed; one ordered
//     pass then writes the keys of every entry above T and of the first needed ones equal to T in
//     column order (a block-wide exclusive scan per tile of 512 columns), and 0 in the slots from
//     m to min(k, n).
//  3. cub::DeviceSegmentedSort::SortKeysDescending of each row's min(k, n) keys. Keys are
//     distinct, so the order is unique: deterministic whatever the sort's stability.
//  4. decode_kernel: column = ~low 32 bits, score = scores[row, column]; empty slots (and slots
//     >= n) get -inf / UINT32_MAX.
// Results equal the CPU's exactly (same set, same order, same bits).
//
// With an activation (Backend::top_k's, issue 45): the scores are pre-activations z, and each
// read of a score in steps 2 and 4 is f(z + bias[c]) (formulas::activate, the expression
// activation_forward_kernel writes: the same bits), so that predict's separate activation pass
// over [batch, n] (one read and one write of every score, 0.9 GB per batch of 4,096 rows of the
// ML-20M shape) is not run. The select kernel reads each row five times (four radix passes and
// the collect) and recomputes f each time; a row of 27,278 floats stays in L1/L2 between the
// passes and the exp is a few instructions: cheaper than the pass written back to HBM
// (estimate; compiles, untested on GPU).
#include <cub/device/device_segmented_sort.cuh>

#include "cuda_common.cuh"
#include "formulas/activation.h"

namespace sparsenet::cuda {

namespace {

constexpr int kSelectThreads = 512;
constexpr size_t kMaxKeys = size_t(16) << 20;

__device__ __forceinline__ uint32_t ordered_bits(float v) {
    const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);  // -0 ties with +0
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// The activation applied to each score (kActivate), as activation_forward_kernel applies it.
struct ScoreActivation {
    formulas::ActivationParams params;
    const float* bias;  // [n] or nullptr
    __device__ __forceinline__ float operator()(float z, size_t c) const {
        return formulas::activate(params, bias != nullptr ? z + bias[c] : z);
    }
};

template <bool kActivate>
__device__ __forceinline__ float score_at(const float* row, size_t c, const ScoreActivation& act) {
    if constexpr (kActivate) {
        return act(row[c], c);
    } else {
        return row[c];
    }
}

template <bool kActivate>
struct RowView {
    const float* scores;
    const uint32_t* bits;  // exclusion bitmap of the row, or nullptr
    ScoreActivation act;
    __device__ bool usable(size_t c, uint32_t* key) const {
        const float v = score_at<kActivate>(scores, c, act);
        if (isnan(v)) return false;
        if (bits != nullptr && ((bits[c >> 5] >> (c & 31)) & 1u) != 0u) return false;
        *key = ordered_bits(v);
        return true;
    }
};

__global__ void exclusion_bits_kernel(CsrBatchView exclude, size_t row0, size_t n, size_t words,
                                      uint32_t* bits) {
    const size_t b = blockIdx.x;
    const uint64_t ex = example_of(exclude.batch, row0 + b);
    const uint64_t end = exclude.offsets[ex + 1];
    for (uint64_t e = exclude.offsets[ex] + threadIdx.x; e < end; e += blockDim.x) {
        const uint32_t c = exclude.indices[e];
        if (c < n) atomicOr(bits + b * words + (c >> 5), 1u << (c & 31));
    }
}

template <bool kActivate>
__global__ void __launch_bounds__(kSelectThreads)
    select_kernel(ConstMatrixView scores, size_t row0, const uint32_t* bits, size_t words,
                  size_t kk, unsigned long long* keys, ScoreActivation act) {
    __shared__ uint32_t hist[256];
    __shared__ uint32_t scan_smem[kSelectThreads / 32 + 1];
    __shared__ uint32_t s_prefix, s_remaining, s_m, s_gt_base, s_tie_base;
    const size_t b = blockIdx.x;
    const size_t n = scores.cols;
    const RowView<kActivate> row{scores.data + (row0 + b) * scores.ld,
                                 bits != nullptr ? bits + b * words : nullptr, act};
    unsigned long long* out = keys + b * kk;
    const int tid = threadIdx.x;

    // Radix select: the m-th largest ordered score, most significant byte first.
    uint32_t prefix = 0, prefix_mask = 0;
    for (int pass = 0; pass < 4; ++pass) {
        const int shift = 24 - 8 * pass;
        for (int i = tid; i < 256; i += kSelectThreads) hist[i] = 0;
        __syncthreads();
        for (size_t base = 0; base < n; base += kSelectThreads) {
            const size_t c = base + tid;
            uint32_t key = 0;
            const bool counted = c < n && row.usable(c, &key) && (key & prefix_mask) == prefix;
            // Warp-aggregated: lanes with the same digit add once (scores of one row often share
            // their high bytes, which would serialise plain shared-memory atomics).
            const uint32_t digit = counted ? (key >> shift) & 0xffu : 256u;
            const unsigned int peers = __match_any_sync(kFullMask, digit);
            if (counted && int(threadIdx.x & 31) == __ffs(peers) - 1)
                atomicAdd(&hist[digit], uint32_t(__popc(peers)));
        }
        __syncthreads();
        if (tid == 0) {
            if (pass == 0) {
                uint32_t usable = 0;
                for (int d = 0; d < 256; ++d) usable += hist[d];
                s_m = uint32_t(usable < kk ? usable : kk);
                s_remaining = s_m;
            }
            uint32_t remaining = s_remaining;
            if (remaining > 0) {
                uint32_t above = 0;
                int d = 255;
                for (; d > 0; --d) {
                    if (above + hist[d] >= remaining) break;
                    above += hist[d];
                }
                s_remaining = remaining - above;
                s_prefix = prefix | (uint32_t(d) << shift);
            } else {
                s_prefix = prefix;
            }
        }
        __syncthreads();
        if (s_m == 0) break;  // nothing usable: every slot is empty
        prefix = s_prefix;
        prefix_mask |= 0xffu << shift;
    }
    const uint32_t m = s_m;
    const uint32_t threshold = prefix;
    const uint32_t need_ties = m > 0 ? s_remaining : 0u;
    const uint32_t greater = m - need_ties;

    // Collect: every key above the threshold, and the first need_ties keys equal to it in
    // column order (the CPU's tie rule).
    if (tid == 0) {
        s_gt_base = 0;
        s_tie_base = 0;
    }
    __syncthreads();
    for (size_t base = 0; m > 0 && base < n; base += kSelectThreads) {
        if (s_gt_base >= greater && s_tie_base >= need_ties) break;  // uniform: shared values
        const size_t c = base + tid;
        uint32_t key = 0;
        const bool ok = c < n && row.usable(c, &key);
        const bool gt = ok && key > threshold;
        const bool tie = ok && key == threshold;
        uint32_t total = 0;
        const uint32_t packed = (gt ? 1u : 0u) | (tie ? 1u << 16 : 0u);
        const uint32_t pos = block_exclusive_scan<kSelectThreads>(packed, scan_smem, &total);
        const unsigned long long full = (static_cast<unsigned long long>(key) << 32) |
                                        static_cast<unsigned long long>(~uint32_t(c));
        if (gt) {
            const uint32_t slot = s_gt_base + (pos & 0xffffu);
            if (slot < greater) out[slot] = full;
        } else if (tie) {
            const uint32_t t = s_tie_base + (pos >> 16);
            if (t < need_ties) out[greater + t] = full;
        }
        __syncthreads();
        if (tid == 0) {
            s_gt_base += total & 0xffffu;
            s_tie_base += total >> 16;
        }
        __syncthreads();
    }
    for (size_t slot = m + tid; slot < kk; slot += kSelectThreads) out[slot] = 0ull;
}

__global__ void segment_offsets_kernel(int64_t* offsets, size_t rows, size_t kk) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i <= rows;
         i += size_t(gridDim.x) * blockDim.x)
        offsets[i] = int64_t(i * kk);
}

template <bool kActivate>
__global__ void decode_kernel(const unsigned long long* keys, size_t kk, size_t k,
                              ConstMatrixView scores, size_t row0, size_t rows, float* out_scores,
                              uint32_t* out_indices, ScoreActivation act) {
    const size_t total = rows * k;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += size_t(gridDim.x) * blockDim.x) {
        const size_t b = i / k, slot = i % k;
        const unsigned long long key = slot < kk ? keys[b * kk + slot] : 0ull;
        float score = -INFINITY;
        uint32_t index = kNone;
        if (key != 0ull) {
            index = ~static_cast<uint32_t>(key & 0xffffffffull);
            score = score_at<kActivate>(scores.data + (row0 + b) * scores.ld, index, act);
        }
        out_scores[(row0 + b) * k + slot] = score;
        out_indices[(row0 + b) * k + slot] = index;
    }
}

}  // namespace

void launch_top_k(const Context& ctx, ConstMatrixView scores, const CsrBatchView* exclude, size_t k,
                  float* out_scores, uint32_t* out_indices, TopKScratch& s,
                  const formulas::ActivationParams* act, const float* bias) {
    const size_t rows = scores.rows, n = scores.cols;
    if (rows == 0 || k == 0) return;
    if (act != nullptr && act->kind == Activation::kSoftMax) {
        throw Error(ErrorCategory::kInternal, "top_k: SoftMax is row-wise, not applied here");
    }
    const ScoreActivation activation{act != nullptr ? *act : formulas::ActivationParams{}, bias};
    const bool fused = act != nullptr;
    const size_t kk = std::min(k, n);
    if (kk == 0) {  // no columns: every slot is empty
        const Shape2d g = dims(grid_stride_shape(rows * k, 256, 256, 32, ctx.sm_count));
        decode_kernel<false><<<g.grid, g.block, 0, ctx.stream>>>(
            nullptr, 0, k, scores, 0, rows, out_scores, out_indices, activation);
        check_launch(ctx, "decode_kernel");
        return;
    }
    const size_t words = (n + 31) / 32;
    size_t chunk = std::max<size_t>(1, std::min(rows, kMaxKeys / kk));
    chunk = std::min<size_t>(chunk, 0x7fffffffu);
    auto* keys = s.keys.get_as<unsigned long long>(ctx, chunk * kk, "top-k keys");
    auto* sorted = s.sorted.get_as<unsigned long long>(ctx, chunk * kk, "top-k sorted keys");
    auto* offsets = s.offsets.get_as<int64_t>(ctx, chunk + 1, "top-k segment offsets");
    uint32_t* bits = nullptr;
    if (exclude != nullptr)
        bits = s.exclude_bits.get_as<uint32_t>(ctx, chunk * words, "top-k exclusion bitmap");

    for (size_t row0 = 0; row0 < rows; row0 += chunk) {
        const size_t cr = std::min(chunk, rows - row0);
        if (exclude != nullptr) {
            check_cuda(cudaMemsetAsync(bits, 0, cr * words * sizeof(uint32_t), ctx.stream),
                       "cudaMemsetAsync", "clearing the top-k exclusion bitmap");
            const Shape2d g = dims(row_blocks_shape(cr, 128));  // a block per row's exclusions
            exclusion_bits_kernel<<<g.grid, g.block, 0, ctx.stream>>>(*exclude, row0, n, words,
                                                                      bits);
            check_launch(ctx, "exclusion_bits_kernel");
        }
        const Shape2d sel = dims(row_blocks_shape(cr, kSelectThreads));  // a block per row
        if (fused) {
            select_kernel<true><<<sel.grid, sel.block, 0, ctx.stream>>>(scores, row0, bits, words,
                                                                        kk, keys, activation);
        } else {
            select_kernel<false><<<sel.grid, sel.block, 0, ctx.stream>>>(scores, row0, bits, words,
                                                                         kk, keys, activation);
        }
        check_launch(ctx, "select_kernel");
        const Shape2d off = dims(grid_stride_shape(cr + 1, 256, 256, 32, ctx.sm_count));
        segment_offsets_kernel<<<off.grid, off.block, 0, ctx.stream>>>(offsets, cr, kk);
        check_launch(ctx, "segment_offsets_kernel");
        const int64_t items = int64_t(cr * kk);
        size_t temp_bytes = 0;
        check_cuda(cub::DeviceSegmentedSort::SortKeysDescending(nullptr, temp_bytes, keys, sorted,
                                                                items, int64_t(cr), offsets,
                                                                offsets + 1, ctx.stream),
                   "cub::DeviceSegmentedSort::SortKeysDescending",
                   "sizing the top-k sort of " + std::to_string(items) + " keys");
        void* temp = s.temp.get(ctx, std::max<size_t>(temp_bytes, 1), "top-k sort temporary");
        check_cuda(cub::DeviceSegmentedSort::SortKeysDescending(temp, temp_bytes, keys, sorted,
                                                                items, int64_t(cr), offsets,
                                                                offsets + 1, ctx.stream),
                   "cub::DeviceSegmentedSort::SortKeysDescending",
                   "sorting " + std::to_string(items) + " top-k keys");
        const Shape2d dec = dims(grid_stride_shape(cr * k, 256, 256, 32, ctx.sm_count));
        if (fused) {
            decode_kernel<true><<<dec.grid, dec.block, 0, ctx.stream>>>(
                sorted, kk, k, scores, row0, cr, out_scores, out_indices, activation);
        } else {
            decode_kernel<false><<<dec.grid, dec.block, 0, ctx.stream>>>(
                sorted, kk, k, scores, row0, cr, out_scores, out_indices, activation);
        }
        check_launch(ctx, "decode_kernel");
    }
}

}  // namespace sparsenet::cuda
