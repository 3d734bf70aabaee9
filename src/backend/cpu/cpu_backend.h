// The CPU backend: host memory, OpenMP loops and OpenBLAS. Every op forwards to the templates in
// cpu_ops.h instantiated for float. Scratch buffers are members that only grow, so a warm
// backend allocates nothing per batch. One backend runs one op at a time (the scratch is not
// shared between concurrent callers).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/amx_gemm.h"
#include "backend/cpu/bf16_matmul.h"
#include "backend/cpu/cpu_ops.h"

namespace sparsenet {

class CpuBackend final : public Backend {
  public:
    // threads: OpenMP threads for the op loops; 0 = omp_get_max_threads().
    explicit CpuBackend(int threads = 0);
    ~CpuBackend() override = default;

    std::string name() const override { return "cpu"; }
    int threads() const { return threads_; }

    // The kernel of this backend's BF16 GEMMs (bf16_matmul.h): cpu::bf16_choice()'s until set.
    // Tests set it to compare the two; kOnednn where it cannot run is Error(kUsage).
    cpu::Bf16Kernel bf16_kernel() const;
    void set_bf16_kernel(cpu::Bf16Kernel kernel);
    // Whether kOnednn runs the weight gradients of wide layers (trans_a, !trans_b,
    // cpu::amx_gemm_tn_worth) on cpu::amx_gemm_tn: cpu::bf16_choice()'s until set. Tests set it
    // to compare it with oneDNN's matmul; true where cpu::amx_available() is false is
    // Error(kUsage).
    bool amx_gemm() const;
    void set_amx_gemm(bool on);
    size_t amx_gemm_calls() const { return amx_gemm_calls_; }  // how many GEMMs it ran
    // The implementation oneDNN chose for this backend's last new matmul ("" before any).
    const std::string& onednn_implementation() const { return onednn_.last_implementation(); }

    void* allocate(size_t bytes, const char* what) override;
    void deallocate(void* p) override;
    void upload(void* dst, const void* host_src, size_t bytes) override;
    void download(void* host_dst, const void* src, size_t bytes) override;
    void copy(void* dst, const void* src, size_t bytes) override;
    void fill(float* dst, size_t n, float value) override;
    void synchronize() override {}

    // What allocate() handed out and deallocate() has not taken back (out-of-memory messages).
    size_t held_bytes() const { return held_bytes_.load(std::memory_order_relaxed); }
    size_t held_buffers() const { return held_buffers_.load(std::memory_order_relaxed); }

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
    void bias_activation_dropout_impl(const formulas::ActivationParams& act, const float* bias,
                                      const DropoutMask& mask, MatrixView z,
                                      uint16_t* z_bf16) override;
    void activation_backward_column_sum_impl(const formulas::ActivationParams& act,
                                             ConstMatrixView a, const DropoutMask* mask,
                                             MatrixView d, float* column_sums,
                                             uint16_t* d_bf16) override;
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
    void sparse_step_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz, float alpha,
                          const formulas::OptimizerStep& step, MatrixView w,
                          const SparseRowGrad& grad, float* state1, float* state2,
                          SparseUpdate mode, RowClock clock) override;
    void clip_rows_impl(float max_norm, const float* sq_norm, MatrixView m) override;
    void add_matrix_impl(float alpha, ConstMatrixView x, float beta, MatrixView y) override;
    void scatter_rows_impl(const SparseRowGrad& grad, float beta, MatrixView dense) override;
    void optimizer_step_impl(const formulas::OptimizerStep& step, MatrixView w, ConstMatrixView g,
                             float* state1, float* state2, uint16_t* w_bf16) override;
    void round_bf16_impl(ConstMatrixView m, uint16_t* out) override;
    void optimizer_step_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                                  const SparseRowGrad& grad, float* state1, float* state2,
                                  SparseUpdate mode, RowClock clock) override;
    void catch_up_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                            const CsrBatchView* x, float* state1, RowClock clock) override;
    void top_k_impl(ConstMatrixView scores, const CsrBatchView* exclude, size_t k,
                    float* out_scores, uint32_t* out_indices,
                    const TopKActivation* activation) override;

    // Under the emulated BF16 GEMM, c's copy is written block by block (bf16_emulation.h).
    void gemm_with_copy_impl(bool trans_a, bool trans_b, float alpha, ConstMatrixView a,
                             ConstMatrixView b, float beta, MatrixView c,
                             uint16_t* c_bf16) override;
    // Whether gemm under Precision::kBf16 runs on oneDNN's matmul.
    bool gemm_on_onednn(size_t m, size_t n, size_t k) const;
    // gemm under Precision::kBf16 on oneDNN's matmul (m > cpu::kGemmFewRows, k > 0).
    void gemm_onednn(bool trans_a, bool trans_b, float alpha, ConstMatrixView a, ConstMatrixView b,
                     float beta, MatrixView c);

    // Runs an op that grows host scratch (std::vector): std::bad_alloc from it becomes the
    // out-of-memory Error naming the op.
    template <class F>
    void with_scratch(Op op, F&& run);

    int threads_;
    std::atomic<size_t> held_bytes_{0};
    std::atomic<size_t> held_buffers_{0};
    cpu::WeightGradScratch<float> weight_grad_scratch_;
    cpu::RowsStepScratch<float> rows_step_scratch_;
    std::vector<double> row_loss_;
    std::vector<double> column_kl_;
    std::vector<cpu::ScoreIndex<float>> top_k_scratch_;
    std::vector<float> top_k_rows_;  // top_k with an activation: each thread's activated row
    // the emulated BF16 gemm's panels: operands rounded to BF16, or widened from their copies
    std::vector<float> bf16_a_, bf16_b_;
    // kOnednn: the matmul primitives, operands packed dense, and C's dense scratch where its
    // padding cannot be run over
    mutable std::optional<cpu::Bf16Kernel> bf16_kernel_;
    cpu::OnednnMatmul onednn_;
    std::vector<uint16_t> dense_a_, dense_b_;
    std::vector<float> dense_c_;
    mutable std::optional<bool> amx_gemm_;
    cpu::AmxScratch amx_scratch_;
    size_t amx_gemm_calls_ = 0;
};

}  // namespace sparsenet
