// Device helpers shared by the CUDA kernels (kernels/cuda_*.cu): launch shapes, deterministic
// block reductions and scans, the batch-row indirection and the deferred-error report.
//
// Determinism: every reduction here combines values in a fixed pattern that depends only on the
// block size (warp shuffles down, then the warp totals in warp order), never on timing, so a
// kernel that uses them gives bit-identical results on every run with the same shapes.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cuda_kernels.h"
#include "sparsenet/error.h"

namespace sparsenet::cuda {

constexpr unsigned int kFullMask = 0xffffffffu;
constexpr uint32_t kNone = 0xffffffffu;

// Dataset row of batch row r (BatchRows: an index list or a first row).
__device__ __forceinline__ uint64_t example_of(const BatchRows& rows, size_t r) {
    return rows.rows != nullptr ? uint64_t(rows.rows[r]) : rows.first_row + r;
}

__device__ __forceinline__ float csr_value(const CsrBatchView& x, uint64_t e) {
    return x.values != nullptr ? x.values[e] : 1.0f;
}

// Records the first deferred error; later ones are dropped (the host reports the first).
__device__ __forceinline__ void report(DeviceStatus* status, unsigned int code, Op op,
                                       unsigned long long a, unsigned long long b) {
    if (atomicCAS(&status->code, 0u, code) == 0u) {
        status->op = static_cast<unsigned int>(op);
        status->a = a;
        status->b = b;
    }
}

// ---- launch shapes ----

// The grids are computed by the host functions of launch_shapes.h (tested on the CPU,
// tests/backend/launch_shapes_test.cpp); dims() turns one into CUDA's dim3s:
//   const Shape2d s = dims(elementwise_shape(rows, cols));
//   kernel<<<s.grid, s.block, 0, ctx.stream>>>(...);
struct Shape2d {
    dim3 grid;
    dim3 block;
};

inline Shape2d dims(const LaunchShape& s) {
    return {dim3(s.grid.x, s.grid.y, s.grid.z), dim3(s.block.x, s.block.y, s.block.z)};
}

// Row r and column c of the calling thread in an elementwise_shape launch (loop over r).
#define SN_ROWS_LOOP(r, rows)                                                        \
    for (size_t r = size_t(blockIdx.y) * blockDim.y + threadIdx.y; r < size_t(rows); \
         r += size_t(gridDim.y) * blockDim.y)
#define SN_THIS_COLUMN() (size_t(blockIdx.x) * blockDim.x + threadIdx.x)

// ---- block reductions (1-D blocks of Threads threads, every thread calls) ----

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(kFullMask, v, off);
    return v;
}

// Sum over the block in a fixed order; every thread gets the total. smem: Threads / 32 values.
template <int Threads, class T>
__device__ T block_sum(T v, T* smem) {
    static_assert(Threads % 32 == 0 && Threads <= 1024, "block size");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T w = lane < Threads / 32 ? smem[lane] : T(0);
        w = warp_sum(w);
        if (lane == 0) smem[0] = w;
    }
    __syncthreads();
    const T total = smem[0];
    __syncthreads();  // smem may be reused right after
    return total;
}

// Max over the block ("a > b ? a : b", so NaN never wins against a number); every thread gets it.
template <int Threads>
__device__ float block_max(float v, float* smem) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_down_sync(kFullMask, v, off);
        v = o > v ? o : v;
    }
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < Threads / 32 ? smem[lane] : -INFINITY;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            const float o = __shfl_down_sync(kFullMask, w, off);
            w = o > w ? o : w;
        }
        if (lane == 0) smem[0] = w;
    }
    __syncthreads();
    const float m = smem[0];
    __syncthreads();
    return m;
}

// Exclusive prefix sum over the block of one value per thread (uint32_t or uint64_t), in thread
// order; *total (every thread) gets the block's sum. smem: Threads / 32 + 1 values.
template <int Threads, class T>
__device__ T block_exclusive_scan(T v, T* smem, T* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T incl = v;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const T o = __shfl_up_sync(kFullMask, incl, off);
        if (lane >= off) incl += o;
    }
    if (lane == 31) smem[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const T w = lane < Threads / 32 ? smem[lane] : T(0);
        T wi = w;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const T o = __shfl_up_sync(kFullMask, wi, off);
            if (lane >= off) wi += o;
        }
        if (lane < Threads / 32) smem[lane] = wi - w;  // exclusive warp offsets
        if (lane == Threads / 32 - 1) smem[Threads / 32] = wi;
    }
    __syncthreads();
    const T result = smem[warp] + incl - v;
    *total = smem[Threads / 32];
    __syncthreads();
    return result;
}

}  // namespace sparsenet::cuda
