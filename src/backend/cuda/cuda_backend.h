// The CUDA backend: device memory, one compute stream plus a copy stream, cuBLAS on the compute
// stream, and the kernels of kernels/cuda_*.cu. Implements the whole op table of backend.h with
// the CPU backend's semantics (src/backend/cpu/ is the reference; the parity tests on
// tests/backend/parity_harness.h compare the two). Compiles for sm_90 (GPU status: docs/gpu.md).
//
// Execution model:
//  * Every op is enqueued on the compute stream and returns at once; ops run in call order.
//  * upload / download go through two pinned staging buffers on the copy stream, ordered after the
//    compute work already enqueued (events both ways), so a buffer still read by an earlier
//    kernel is never overwritten and later kernels see the new data. Both return when the
//    transfer is complete (an upload is then visible to other streams and backends too, e.g.
//    the Recommender's per-call backends reading the network's weights).
//  * Errors found by kernels (ids out of range, a gradient capacity too small) are recorded in a
//    device status block and thrown as Error(kInternal) by the next synchronize() or download().
//  * Launch errors are checked right after each launch (check_launch, cuda_kernels.h); an
//    asynchronous fault is reported with the last kernel enqueued, and
//    SPARSENET_CUDA_SYNC_CHECK=1 synchronises after every launch so that it names the kernel.
//  * Memory: cudaMallocAsync / cudaFreeAsync on the compute stream (a pool that keeps freed
//    memory for reuse), or cudaMalloc / cudaFree where the device has no memory pools.
//  * GEMM math (Backend::set_precision; NetworkOptions::precision, --precision): TF32 tensor
//    cores (CUBLAS_TF32_TENSOR_OP_MATH, about 1e-3 relative error) by default, or exact fp32
//    (CUBLAS_DEFAULT_MATH) when SPARSENET_CUDA_TF32=0 and nothing else names a precision; bf16:
//    both operands converted to BF16 copies (round_bf16_kernel, formulas/precision.h, as the
//    CPU's emulation) and cublasGemmEx with CUBLAS_COMPUTE_32F. See docs/gpu.md, "Precision".
// Not thread-safe: one backend runs one op at a time (like the CPU backend).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <unordered_map>

#include "backend/backend.h"
#include "cuda_kernels.h"

struct cublasContext;

namespace sparsenet {

class CudaBackend final : public Backend {
  public:
    // device: a CUDA device index the caller checked (cuda::device_usable).
    explicit CudaBackend(int device);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string name() const override { return "cuda:" + std::to_string(device_); }
    int device() const { return device_; }
    bool tf32() const { return precision_ == Precision::kTf32; }
    // The stream every op is enqueued on. The NCCL communicator enqueues its collectives there
    // too, so they run in call order with the ops (src/comm/nccl_communicator.cpp).
    cudaStream_t compute_stream() const { return ctx_.stream; }

    void* allocate(size_t bytes, const char* what) override;
    void deallocate(void* p) override;
    void upload(void* dst, const void* host_src, size_t bytes) override;
    void download(void* host_dst, const void* src, size_t bytes) override;
    void copy(void* dst, const void* src, size_t bytes) override;
    void fill(float* dst, size_t n, float value) override;
    void synchronize() override;

  private:
    // The op table (backend.h): Backend checks the arguments, then calls these.
    void csr_matmul_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView w, MatrixView z,
                         float beta) override;
    void csr_weight_grad_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                              float alpha, const SparseRowGrad& grad) override;
    void gemm_impl(bool trans_a, bool trans_b, float alpha, ConstMatrixView a, ConstMatrixView b,
                   float beta, MatrixView c) override;
    void bias_activation_forward_impl(const formulas::ActivationParams& act, const float* bias,
                                      MatrixView z, uint16_t* z_bf16) override;
    void activation_backward_impl(const formulas::ActivationParams& act, ConstMatrixView a,
                                  const DropoutMask* mask, MatrixView d, uint16_t* d_bf16) override;
    void column_sum_impl(ConstMatrixView m, float alpha, float beta, float* out) override;
    void dropout_impl(const DropoutMask& mask, MatrixView m) override;
    void sparse_step_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz, float alpha,
                          const formulas::OptimizerStep& step, MatrixView w,
                          const SparseRowGrad& grad, float* state1, float* state2,
                          SparseUpdate mode, RowClock clock) override;
    void activation_backward_column_sum_impl(const formulas::ActivationParams& act,
                                             ConstMatrixView a, const DropoutMask* mask,
                                             MatrixView d, float* column_sums,
                                             uint16_t* d_bf16) override;
    void bias_activation_dropout_impl(const formulas::ActivationParams& act, const float* bias,
                                      const DropoutMask& mask, MatrixView z,
                                      uint16_t* z_bf16) override;
    void output_epilogue_impl(const formulas::LossParams& loss,
                              const formulas::ActivationParams& act, const float* bias,
                              MatrixView z, const CsrBatchView& target, float scale,
                              MatrixView delta, double* loss_sum, float* row_norms,
                              uint16_t* delta_bf16) override;
    void output_delta_impl(const formulas::LossParams& loss, const formulas::ActivationParams& act,
                           ConstMatrixView a, const CsrBatchView& target, float scale,
                           MatrixView delta, double* loss_sum, float* row_norms,
                           uint16_t* delta_bf16) override;
    void sparseness_penalty_impl(float p, float beta, ConstMatrixView a, float scale,
                                 MatrixView delta, double* loss_sum) override;
    void normalize_rows_impl(float max_norm, MatrixView m) override;
    void normalize_columns_impl(float max_norm, MatrixView w) override;
    void row_max_impl(ConstMatrixView m, float* out) override;
    void exp_rows_impl(const float* shift, MatrixView m, float* row_sum) override;
    void divide_rows_impl(const float* divisor, MatrixView m) override;
    void row_sum_squares_impl(ConstMatrixView m, float* out) override;
    void sum_squares_impl(const std::vector<ConstMatrixView>& parts, float* out) override;
    void clip_rows_impl(float max_norm, const float* sq_norm, MatrixView m) override;
    void add_matrix_impl(float alpha, ConstMatrixView x, float beta, MatrixView y) override;
    void scatter_rows_impl(const SparseRowGrad& grad, float beta, MatrixView dense) override;
    void optimizer_step_impl(const formulas::OptimizerStep& step, MatrixView w, ConstMatrixView g,
                             float* state1, float* state2, uint16_t* w_bf16) override;
    void round_bf16_impl(ConstMatrixView m, uint16_t* out) override;
    void optimizer_step_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                                  const SparseRowGrad& grad, float* state1, float* state2,
                                  SparseUpdate mode, RowClock clock) override;
    uint64_t free_memory() override;
    void catch_up_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                            const CsrBatchView* x, float* state1, RowClock clock) override;
    void top_k_impl(ConstMatrixView scores, const CsrBatchView* exclude, size_t k,
                    float* out_scores, uint32_t* out_indices,
                    const TopKActivation* activation) override;
    void set_precision_impl(Precision p) override;

    static constexpr int kStagingSlots = 2;
    static constexpr size_t kStagingBytes = size_t(4) << 20;

    void activate() const;            // makes device_ current for this thread
    void order_copy_after_compute();  // copy stream waits for the work enqueued so far
    void enqueue_status_readback();   // status block -> pinned mirror, on the compute stream
    void raise_device_status();       // throws Error(kInternal) for a recorded kernel error
    void release_all() noexcept;
    // " (the last kernel enqueued: <name>; ...)" for the errors of synchronising calls: an
    // asynchronous fault is found there, after the kernel that made it.
    std::string fault_hint() const;

    int device_;
    cuda::Context ctx_;
    cudaStream_t copy_stream_ = nullptr;
    cudaEvent_t compute_done_ = nullptr;  // recorded on the compute stream before a transfer
    cudaEvent_t copy_done_ = nullptr;     // recorded on the copy stream after an upload
    cudaEvent_t staging_done_[kStagingSlots] = {nullptr, nullptr};
    void* staging_[kStagingSlots] = {nullptr, nullptr};  // pinned host memory
    cuda::DeviceStatus* status_host_ = nullptr;          // pinned mirror of ctx_.status
    cublasContext* cublas_ = nullptr;

    cuda::WeightGradScratch weight_grad_scratch_;
    cuda::ReduceScratch reduce_scratch_;
    cuda::ScratchBuffer row_loss_scratch_;
    cuda::ScratchBuffer row_map_scratch_;
    cuda::ScratchBuffer csr_matmul_partial_;  // csr_matmul's parts ([parts, rows, out] floats)
    cuda::TopKScratch top_k_scratch_;
    cuda::ScratchBuffer bf16_a_, bf16_b_;      // gemm's BF16 operand copies (Precision::kBf16)
    std::unordered_map<void*, size_t> sizes_;  // allocate()'s buffers (ctx_.held_bytes)
};

}  // namespace sparsenet
