// The seam between the CUDA backend (src/backend/cuda/cuda_backend.cpp, host C++) and its kernels
// (kernels/cuda_*.cu, one file per op family): the launch context, the deferred-error status
// block, growable device scratch, and one launcher per op. Launchers check nothing the backend
// already checked (Backend validates every op's arguments once for all backends, in
// src/backend/backend_ops.cpp); they enqueue work on ctx.stream and return without
// synchronising.
//
// Errors: a failed launch throws Error(kDevice) naming the kernel and the CUDA error (see
// check_launch for how a fault of an earlier kernel is told apart from this launch's). Errors
// that only the device can see (a column id out of range, a gradient capacity too small) are
// recorded in the DeviceStatus block by the kernel that finds them and thrown as Error(kInternal)
// by the next host synchronisation (CudaBackend::synchronize or download).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formulas/activation.h"
#include "formulas/loss.h"
#include "formulas/optimizer.h"
#include "launch_shapes.h"
#include "sparsenet/optimizer.h"
#include "views.h"

namespace sparsenet::cuda {

// Deferred errors, set by kernels (first error wins), read by the host after a synchronisation.
enum StatusCode : unsigned int {
    kStatusOk = 0,
    kStatusColumnOutOfRange = 1,     // a = column id, b = width (csr_matmul, csr_weight_grad)
    kStatusGradCapacity = 2,         // a = touched rows, b = capacity (csr_weight_grad)
    kStatusPairOverflow = 3,         // a = batch entries, b = scratch pairs (csr_weight_grad)
    kStatusRowOutOfRange = 4,        // a = row id, b = rows (scatter_rows, optimizer_step_rows)
    kStatusCountOverCapacity = 5,    // a = *count, b = capacity (scatter_rows, optimizer_step_rows)
    kStatusTargetOutOfRange = 6,     // a = column id, b = width (output_delta)
    kStatusTargetNotIncreasing = 7,  // a = example row, b = column id (output_delta)
};

struct DeviceStatus {
    unsigned int code;
    unsigned int op;  // which op reported it (Op as an integer)
    unsigned long long a;
    unsigned long long b;
};

// Everything a launcher needs to enqueue work.
struct Context {
    cudaStream_t stream = nullptr;
    DeviceStatus* status = nullptr;  // device memory
    bool use_pool = true;            // cudaMallocAsync / cudaFreeAsync (else cudaMalloc / cudaFree)
    int sm_count = 1;
    int device = 0;
    // What CudaBackend::allocate handed out and deallocate has not taken back (op scratch not
    // counted): out-of-memory messages report it.
    size_t held_bytes = 0;
    size_t held_buffers = 0;
    // SPARSENET_CUDA_SYNC_CHECK=1 (read when the backend is created): check_launch synchronises
    // the stream after every launch, so an asynchronous fault names the kernel that made it.
    bool sync_check = false;
    // The last kernel check_launch accepted (a string literal): named by the errors of later
    // launches and synchronisations, since a fault found there happened in it or before it.
    mutable const char* last_kernel = nullptr;
};

// Device memory in stream order (pool) or plain cudaMalloc; throws out_of_memory_error
// (backend.h) naming `what`, the size, the CUDA error, the device's free and total memory and what
// the backend holds. device_free never throws.
void* device_alloc(const Context& ctx, size_t bytes, const char* what);
void device_free(const Context& ctx, void* p) noexcept;

// Called right after every launch, naming the kernel. cudaGetLastError returns the launch's own
// error (bad configuration, no image for the device, too many resources), but also a sticky
// error left by an earlier kernel that faulted asynchronously (an illegal address, a trap): the
// latter is not this kernel's fault, so the message says so, names the last kernel launched
// before (the fault happened in it or earlier) and points to SPARSENET_CUDA_SYNC_CHECK=1. With
// ctx.sync_check the stream is synchronised after the launch, so a fault names this kernel
// exactly (slow: a debugging and validation mode). Throws Error(kDevice).
void check_launch(const Context& ctx, const char* kernel);
// Whether `err` is a sticky fault of an asynchronously executed kernel (one that poisons the
// context and is reported by whatever runtime call comes next), not a launch error.
bool is_asynchronous_fault(cudaError_t err);
// The message check_launch throws (a pure function, tested without a GPU): `previous` is the
// last kernel launched before (nullptr: none).
std::string launch_error_message(const char* kernel, cudaError_t err, const char* previous,
                                 bool sync_check, int device);
// Throws Error(kDevice) for a failed runtime call: "<call> failed while <doing>: ...".
void check_cuda(cudaError_t err, const char* call, const std::string& doing);

// A device buffer that only grows (reallocated in stream order), so a warm backend allocates
// nothing per batch.
class ScratchBuffer {
  public:
    ScratchBuffer() = default;
    ScratchBuffer(const ScratchBuffer&) = delete;
    ScratchBuffer& operator=(const ScratchBuffer&) = delete;
    ~ScratchBuffer() = default;  // the owner calls release() while the stream is alive

    void* get(const Context& ctx, size_t bytes, const char* what);
    template <class T>
    T* get_as(const Context& ctx, size_t count, const char* what) {
        return static_cast<T*>(get(ctx, count * sizeof(T), what));
    }
    void release(const Context& ctx) noexcept;

  private:
    void* p_ = nullptr;
    size_t bytes_ = 0;
};

// Scratch of csr_weight_grad (kernels/cuda_csr_weight_grad.cu).
struct WeightGradScratch {
    ScratchBuffer touched;     // [in] uint32 flags
    ScratchBuffer positions;   // [in + 1] uint32 exclusive scan of the flags
    ScratchBuffer col_map;     // [in] uint32 compact index of a column, or UINT32_MAX
    ScratchBuffer seg_count;   // [slots] uint32 entries per touched column in the tile
    ScratchBuffer seg_start;   // [slots + 1] uint32 exclusive scan of seg_count
    ScratchBuffer pair_row;    // [pairs] uint32 batch row of each entry, grouped by column
    ScratchBuffer pair_coef;   // [pairs] float alpha * value * noise scale
    ScratchBuffer scan_block;  // [scan blocks + 1] uint32 block totals of the scans
    // The sorted path (capacity < in) reuses touched (row lengths), positions (row starts),
    // col_map (segment heads), seg_count (head numbers) and seg_start, and adds:
    ScratchBuffer sort_keys[2];   // [capacity] uint32 column keys, unsorted and sorted
    ScratchBuffer sort_pairs[2];  // [capacity] uint64 (batch row << 32) | coefficient bits
    ScratchBuffer sort_temp;      // cub::DeviceRadixSort temporary storage
};

// How csr_weight_grad runs for a batch of `rows` rows of an `in`-wide input with gradient
// capacity `capacity` (decided on the host, without a synchronisation; tested on the CPU):
// sorted = the batch's entries are sorted by column in `pairs` = capacity slots (capacity < in:
// the contract bounds the batch's entries by the capacity), else flags over [in] and tiles of
// tile_rows rows with `pairs` slots. work = the elements every call touches besides the entries
// and dz (rows + capacity, or in + pairs): never `in` on the sorted path.
struct WeightGradPlan {
    bool sorted = false;
    size_t pairs = 0;
    size_t tile_rows = 0;
    size_t work = 0;
};
WeightGradPlan weight_grad_plan(size_t rows, size_t in, size_t capacity);

// Scratch of the column reductions (column_sum, sparseness_penalty, normalize_columns).
struct ReduceScratch {
    ScratchBuffer partial;   // [chunks, cols] double partial column sums
    ScratchBuffer column;    // [cols] double or float per-column results
    ScratchBuffer gradient;  // [cols] float per-column gradient (sparseness_penalty)
};

struct TopKScratch {
    ScratchBuffer exclude_bits;  // [rows, ceil(n / 32)] uint32
    ScratchBuffer keys;          // [rows, min(k, n)] uint64
    ScratchBuffer sorted;        // [rows, min(k, n)] uint64
    ScratchBuffer offsets;       // [rows + 1] int64 segment offsets
    ScratchBuffer temp;          // CUB temporary storage
};

// The probe used by device_usable: cudaFuncGetAttributes on a trivial kernel of this build
// (fails with cudaErrorNoKernelImageForDevice when no image fits the device).
cudaError_t probe_kernel_image();

// ---- launchers (one per op; kernels/cuda_*.cu) ----

// kernels/cuda_elementwise.cu
void launch_fill(const Context& ctx, float* dst, size_t n, float value);
void launch_add_matrix(const Context& ctx, float alpha, ConstMatrixView x, float beta,
                       MatrixView y);
void launch_scale_matrix(const Context& ctx, float beta, MatrixView m);  // m *= beta (0: zeros)
// dst[r * dst_ld + c] = the BF16 bits of m[r, c] (formulas::bf16_bits, round to nearest even)
// for c < m.cols, and 0 for m.cols <= c < dst_ld: gemm's operand copies under Precision::kBf16
// (dst contiguous, dst_ld = m.cols) and Backend::round_bf16 (the engine's weight copies,
// dst_ld = m.ld: laid out like the weights, padding zero).
void launch_round_bf16(const Context& ctx, ConstMatrixView m, uint16_t* dst, size_t dst_ld);
// out16 / d16 / delta16 below (nullable): the BF16 copy of the op's FP32 output, written by the
// same kernel beside it (Backend's out_bf16: the output's layout, its padding not written).
void launch_bias_activation_forward(const Context& ctx, const formulas::ActivationParams& act,
                                    const float* bias, MatrixView z, uint16_t* out16 = nullptr);
void launch_activation_backward(const Context& ctx, const formulas::ActivationParams& act,
                                ConstMatrixView a, const DropoutMask* mask, MatrixView d,
                                uint16_t* out16 = nullptr);
void launch_dropout(const Context& ctx, const DropoutMask& mask, MatrixView m);
// bias_activation_forward then dropout in one kernel (element-wise activations with p > 0;
// otherwise the two launches, and with out16 a round_bf16 pass after a separate dropout).
void launch_bias_activation_dropout(const Context& ctx, const formulas::ActivationParams& act,
                                    const float* bias, const DropoutMask& mask, MatrixView z,
                                    uint16_t* out16 = nullptr);
void launch_scatter_rows_add(const Context& ctx, const SparseRowGrad& grad, MatrixView dense);

// kernels/cuda_reduce.cu
void launch_column_sum(const Context& ctx, ConstMatrixView m, float alpha, float beta, float* out,
                       ReduceScratch& s);
// activation_backward then column_sum(d, 1, 0) in one pass over d (element-wise activations; the
// backend keeps the two ops for SoftMax, which backward refuses anyway).
void launch_activation_backward_column_sum(const Context& ctx,
                                           const formulas::ActivationParams& act, ConstMatrixView a,
                                           const DropoutMask* mask, MatrixView d,
                                           float* column_sums, uint16_t* out16, ReduceScratch& s);
void launch_sparseness_penalty(const Context& ctx, float p, float beta, ConstMatrixView a,
                               float scale, MatrixView delta, double* loss_sum, ReduceScratch& s);
void launch_normalize_rows(const Context& ctx, float max_norm, MatrixView m);
void launch_normalize_columns(const Context& ctx, float max_norm, MatrixView w, ReduceScratch& s);
void launch_row_max(const Context& ctx, ConstMatrixView m, float* out);
void launch_exp_rows(const Context& ctx, const float* shift, MatrixView m, float* row_sum);
void launch_divide_rows(const Context& ctx, const float* divisor, MatrixView m);
void launch_row_sum_squares(const Context& ctx, ConstMatrixView m, float* out, ReduceScratch& s);
void launch_clip_rows(const Context& ctx, float max_norm, const float* sq_norm, MatrixView m);
// Backend::sum_squares: every part's chunks in one launch, then one block per part adds them in
// order (parts in groups of kSumSquaresParts per launch pair).
void launch_sum_squares(const Context& ctx, const std::vector<ConstMatrixView>& parts, float* out,
                        ReduceScratch& s);

// kernels/cuda_csr_matmul.cu
// Its thread mapping (csr_matmul_mapping) and parts (csr_matmul_parts): launch_shapes.h.
// partial: scratch of the parts' sums ([parts, rows, out] floats, grown as needed).
void launch_csr_matmul(const Context& ctx, const CsrBatchView& x, SparseNoise noise,
                       ConstMatrixView w, MatrixView z, float beta, ScratchBuffer& partial);

// kernels/cuda_csr_weight_grad.cu
// update.active (sparse_step, only where sparse_step_fusable): each touched row's sums update
// weight row grad.rows[i] as optimizer_step_rows would (kernels/cuda_row_update.cuh), instead of
// being written to grad.values; inactive: csr_weight_grad.
struct RowUpdate {
    bool active = false;
    formulas::OptimizerStep step;
    int slots = 0;  // formulas::optimizer_state_slots(step.kind)
    MatrixView w;
    float* s1 = nullptr;
    float* s2 = nullptr;
    RowClock clock;
};
void launch_csr_weight_grad(const Context& ctx, const CsrBatchView& x, SparseNoise noise,
                            ConstMatrixView dz, float alpha, const SparseRowGrad& grad,
                            WeightGradScratch& s, const RowUpdate& update);
// Whether one pass sums each touched row whole (the sorted path, or the batch in one tile of
// rows): then sparse_step is fused; else the backend runs the two ops.
bool sparse_step_fusable(size_t rows, size_t in, size_t capacity);

// kernels/cuda_output_delta.cu
void launch_output_delta(const Context& ctx, const formulas::LossParams& loss,
                         const formulas::ActivationParams& act, ConstMatrixView a,
                         const CsrBatchView& target, float scale, MatrixView delta,
                         double* loss_sum, float* row_norms, uint16_t* delta16,
                         ScratchBuffer& row_loss);
// output_epilogue: z := f(z + bias), then output_delta of the new z, in the same kernel (one
// block per row) for element-wise activations; SoftMax runs the two kernels in sequence.
void launch_output_epilogue(const Context& ctx, const formulas::LossParams& loss,
                            const formulas::ActivationParams& act, const float* bias, MatrixView z,
                            const CsrBatchView& target, float scale, MatrixView delta,
                            double* loss_sum, float* row_norms, uint16_t* delta16,
                            ScratchBuffer& row_loss);

// kernels/cuda_optimizer.cu
// w_bf16 (nullable, w's layout): the BF16 bits of each updated weight, written in the same pass.
void launch_optimizer_step(const Context& ctx, const formulas::OptimizerStep& step, MatrixView w,
                           ConstMatrixView g, float* state1, float* state2, uint16_t* w_bf16);
void launch_optimizer_step_rows(const Context& ctx, const formulas::OptimizerStep& step,
                                MatrixView w, const SparseRowGrad& grad, float* state1,
                                float* state2, SparseUpdate mode, RowClock clock,
                                ScratchBuffer& row_map);
// Backend::catch_up_rows (x == nullptr: every row).
void launch_catch_up_rows(const Context& ctx, const formulas::OptimizerStep& step, MatrixView w,
                          const CsrBatchView* x, float* state1, RowClock clock);

// kernels/cuda_top_k.cu
// act (nullable): rank and write f(z + bias) of the scores z (Backend::top_k's activation; an
// element-wise kind; bias nullable).
void launch_top_k(const Context& ctx, ConstMatrixView scores, const CsrBatchView* exclude, size_t k,
                  float* out_scores, uint32_t* out_indices, TopKScratch& s,
                  const formulas::ActivationParams* act = nullptr, const float* bias = nullptr);

}  // namespace sparsenet::cuda
