#include "backend/cpu/cpu_backend.h"

#include <malloc.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/bf16_emulation.h"
#include "backend/cpu/host_memory.h"
#include "sparsenet/error.h"

namespace sparsenet {

namespace {

cpu::MatT<float> mat(const MatrixView& m) {
    return {m.data, m.rows, m.cols, m.ld};
}
cpu::CMatT<float> cmat(const ConstMatrixView& m) {
    return {m.data, m.rows, m.cols, m.ld};
}

cpu::CsrT<float> csr(const CsrBatchView& x) {
    cpu::CsrT<float> v;
    v.offsets = x.offsets;
    v.indices = x.indices;
    v.values = x.values;
    v.weights = x.weights;
    v.row_totals = x.row_totals;
    v.rows = x.batch.rows;
    v.first_row = x.batch.first_row;
    v.batch = x.batch.batch;
    v.cols = x.cols;
    v.col_offset = x.col_offset;
    return v;
}

cpu::RowGradT<float> row_grad(const SparseRowGrad& g) {
    return {g.rows, g.count, g.values, g.capacity, g.cols};
}

// memcpy split across threads above this size (one core does not saturate memory bandwidth).
constexpr size_t kParallelCopyBytes = size_t(8) << 20;

void parallel_copy(void* dst, const void* src, size_t bytes, int threads) {
    if (bytes == 0 || dst == src) return;
    if (threads <= 1 || bytes < kParallelCopyBytes) {
        std::memmove(dst, src, bytes);
        return;
    }
    const size_t chunk = (bytes / size_t(threads) + 63) / 64 * 64;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t) {
        const size_t begin = std::min(bytes, size_t(t) * chunk);
        const size_t end = std::min(bytes, begin + chunk);
        if (end > begin)
            std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                        end - begin);
    }
}

}  // namespace

CpuBackend::CpuBackend(int threads) : threads_(threads > 0 ? threads : omp_get_max_threads()) {
    if (threads < 0)
        throw Error(ErrorCategory::kUsage,
                    "CPU backend: thread count must be >= 0 (0 = all "
                    "cores), got " +
                        std::to_string(threads));
    if (threads_ < 1) threads_ = 1;
}

// ---- memory ----

void* CpuBackend::allocate(size_t bytes, const char* what) {
    void* p = cpu::host_allocate(bytes);  // 64-byte aligned; huge pages from 4 MiB
    if (p == nullptr) {
        throw out_of_memory_error("host memory", bytes, what, held_bytes(), held_buffers());
    }
    held_bytes_ += malloc_usable_size(p);
    ++held_buffers_;
    return p;
}

void CpuBackend::deallocate(void* p) {
    if (p == nullptr) return;
    held_bytes_ -= malloc_usable_size(p);
    --held_buffers_;
    std::free(p);
}

template <class F>
void CpuBackend::with_scratch(Op op, F&& run) {
    try {
        run();
    } catch (const std::bad_alloc&) {
        throw Error(ErrorCategory::kDevice,
                    std::string("out of host memory growing the scratch buffers of the ") +
                        to_string(op) + " op; this backend already holds " +
                        format_bytes(held_bytes()) + " in " + std::to_string(held_buffers()) +
                        " buffers; " + kOutOfMemoryAdvice);
    }
}

void CpuBackend::upload(void* dst, const void* host_src, size_t bytes) {
    parallel_copy(dst, host_src, bytes, threads_);
}

void CpuBackend::download(void* host_dst, const void* src, size_t bytes) {
    parallel_copy(host_dst, src, bytes, threads_);
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
    parallel_copy(dst, src, bytes, threads_);
}

void CpuBackend::fill(float* dst, size_t n, float value) {
    const bool par = threads_ > 1 && n >= (size_t(1) << 20);
#pragma omp parallel for num_threads(threads_) schedule(static) if (par)
    for (size_t i = 0; i < n; ++i) dst[i] = value;
}

// ---- compute ----

void CpuBackend::csr_matmul_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView w,
                                 MatrixView z, float beta) {
    // Without FP32 weights (Network::keep_bf16_input_weights) the rows come from the BF16 copy.
    cpu::csr_matmul(csr(x), noise, cmat(w), mat(z), beta, threads_,
                    w.data == nullptr ? w.bf16 : nullptr);
}

void CpuBackend::csr_weight_grad_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                                      float alpha, const SparseRowGrad& grad) {
    with_scratch(Op::kCsrWeightGrad, [&] {
        cpu::csr_weight_grad(csr(x), noise, cmat(dz), alpha, row_grad(grad), weight_grad_scratch_,
                             threads_);
    });
}

void CpuBackend::sparse_step_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                                  float alpha, const formulas::OptimizerStep& step, MatrixView w,
                                  const SparseRowGrad& grad, float* state1, float* state2,
                                  SparseUpdate, RowClock clock) {
    with_scratch(Op::kSparseStep, [&] {
        cpu::sparse_step(csr(x), noise, cmat(dz), alpha, step, mat(w), row_grad(grad), state1,
                         state2, clock, weight_grad_scratch_, threads_);
    });
}

cpu::Bf16Kernel CpuBackend::bf16_kernel() const {
    if (!bf16_kernel_) bf16_kernel_ = cpu::bf16_choice().kernel;
    return *bf16_kernel_;
}

void CpuBackend::set_bf16_kernel(cpu::Bf16Kernel kernel) {
    if (kernel == cpu::Bf16Kernel::kOnednn && !cpu::onednn_bf16_available())
        throw Error(ErrorCategory::kUsage, "CPU backend: oneDNN's BF16 matmul cannot run here (" +
                                               cpu::bf16_choice().line + ")");
    bf16_kernel_ = kernel;
}

bool CpuBackend::amx_gemm() const {
    if (!amx_gemm_) amx_gemm_ = cpu::bf16_choice().amx_gemm && cpu::amx_available();
    return *amx_gemm_;
}

void CpuBackend::set_amx_gemm(bool on) {
    if (on && !cpu::amx_available())
        throw Error(ErrorCategory::kUsage, "CPU backend: this CPU or OS has no AMX tiles");
    amx_gemm_ = on;
}

bool CpuBackend::gemm_on_onednn(size_t m, size_t n, size_t k) const {
    // Up to kGemmFewRows rows (single queries) stay on the memory-bound few-rows path.
    return m > cpu::kGemmFewRows && n > 0 && k > 0 && bf16_kernel() == cpu::Bf16Kernel::kOnednn;
}

void CpuBackend::gemm_impl(bool trans_a, bool trans_b, float alpha, ConstMatrixView a,
                           ConstMatrixView b, float beta, MatrixView c) {
    gemm_with_copy_impl(trans_a, trans_b, alpha, a, b, beta, c, nullptr);
}

void CpuBackend::gemm_with_copy_impl(bool trans_a, bool trans_b, float alpha, ConstMatrixView a,
                                     ConstMatrixView b, float beta, MatrixView c,
                                     uint16_t* c_bf16) {
    with_scratch(Op::kGemm, [&] {
        if (precision_ != Precision::kBf16) {
            cpu::gemm(trans_a, trans_b, alpha, cmat(a), cmat(b), beta, mat(c), threads_);
        } else if (gemm_on_onednn(c.rows, c.cols, trans_a ? a.rows : a.cols)) {
            if (trans_a && !trans_b && amx_gemm() &&
                cpu::amx_gemm_tn_worth(c.rows, c.cols, a.rows, threads_)) {
                // The weight gradient of a wide layer: the update and c's copy in the same pass.
                const size_t lda = a.bf16 != nullptr ? a.ld : a.cols;
                const size_t ldb = b.bf16 != nullptr ? b.ld : b.cols;
                const uint16_t* ad = cpu::dense_bf16(cmat(a), a.bf16, lda, dense_a_, threads_);
                const uint16_t* bd = cpu::dense_bf16(cmat(b), b.bf16, ldb, dense_b_, threads_);
                cpu::amx_gemm_tn(c.rows, c.cols, a.rows, alpha, ad, lda, bd, ldb, beta, c.data,
                                 c.ld, c_bf16, amx_scratch_, threads_);
                ++amx_gemm_calls_;
                return;
            }
            gemm_onednn(trans_a, trans_b, alpha, a, b, beta, c);
        } else {
            // BF16 operands, FP32 products and sums, exactly (backend.h; bf16_emulation.h). An
            // operand with a BF16 copy (ConstMatrixView::bf16) is widened from it, one without
            // is rounded: the same floats (the copy holds the rounding of the same FP32 values),
            // so the CPU computes what the GPU's GEMM on the copy computes.
            cpu::gemm_bf16_emulated(trans_a, trans_b, alpha, {cmat(a), a.bf16}, {cmat(b), b.bf16},
                                    beta, mat(c), c_bf16, bf16_a_, bf16_b_, threads_);
            return;
        }
        if (c_bf16 != nullptr) cpu::round_bf16_into(cmat(c), c_bf16, threads_);
    });
}

void CpuBackend::gemm_onednn(bool trans_a, bool trans_b, float alpha, ConstMatrixView a,
                             ConstMatrixView b, float beta, MatrixView c) {
    // oneDNN 2.6's AMX matmul takes dense operands only (bf16_matmul.h), so the extents run over
    // the views' zero padding where gemm_extents.h's rules allow it (n over C's and B's, k over
    // A's and B's): dsstne-bench's three output-layer GEMMs then read the weights' and the
    // producers' BF16 copies in place and write C in place. What is still not dense is packed.
    const size_t m = c.rows;
    size_t n = c.cols, k = trans_a ? a.rows : a.cols;
    if (!trans_b && c.zero_padded && b.zero_padded && c.ld == b.ld) n = c.ld;
    if (!trans_a && trans_b && a.zero_padded && b.zero_padded && a.ld == b.ld) k = a.ld;
    const uint16_t* ad = cpu::dense_bf16(cmat(a), a.bf16, trans_a ? m : k, dense_a_, threads_);
    const uint16_t* bd = cpu::dense_bf16(cmat(b), b.bf16, trans_b ? k : n, dense_b_, threads_);
    if (c.ld == n) {
        onednn_.run(trans_a, trans_b, m, n, k, alpha, ad, bd, beta, c.data, threads_);
        return;
    }
    // C's padding is not zeros (or C is a column band of a wider matrix): its rows in scratch,
    // then c := scratch + beta * c.
    dense_c_.resize(m * n);
    onednn_.run(trans_a, trans_b, m, n, k, alpha, ad, bd, 0.0f, dense_c_.data(), threads_);
    const bool par = threads_ > 1 && m * n >= (size_t(1) << 16);
#pragma omp parallel for num_threads(threads_) schedule(static) if (par)
    for (size_t r = 0; r < m; ++r) {
        const float* src = dense_c_.data() + r * n;
        float* dst = c.row(r);
        if (beta == 0.0f) {
            std::memcpy(dst, src, c.cols * sizeof(float));
        } else {
            for (size_t j = 0; j < c.cols; ++j) dst[j] = src[j] + beta * dst[j];
        }
    }
}

void CpuBackend::bias_activation_forward_impl(const formulas::ActivationParams& act,
                                              const float* bias, MatrixView z, uint16_t* z_bf16) {
    cpu::bias_activation_forward(act, bias, mat(z), threads_, z_bf16);
}

void CpuBackend::activation_backward_impl(const formulas::ActivationParams& act, ConstMatrixView a,
                                          const DropoutMask* mask, MatrixView d, uint16_t* d_bf16) {
    cpu::activation_backward(act, cmat(a), mask, mat(d), threads_, d_bf16);
}

void CpuBackend::column_sum_impl(ConstMatrixView m, float alpha, float beta, float* out) {
    cpu::column_sum(cmat(m), alpha, beta, out, threads_);
}

void CpuBackend::dropout_impl(const DropoutMask& mask, MatrixView m) {
    cpu::dropout(mask, mat(m), threads_);
}

void CpuBackend::output_delta_impl(const formulas::LossParams& loss,
                                   const formulas::ActivationParams& act, ConstMatrixView a,
                                   const CsrBatchView& target, float scale, MatrixView delta,
                                   double* loss_sum, float* row_norms, uint16_t* delta_bf16) {
    with_scratch(Op::kOutputDelta, [&] {
        cpu::output_delta(loss, act, cmat(a), csr(target), scale, mat(delta), loss_sum, row_loss_,
                          threads_, static_cast<float*>(nullptr),
                          static_cast<const float*>(nullptr), row_norms, delta_bf16);
    });
}

void CpuBackend::bias_activation_dropout_impl(const formulas::ActivationParams& act,
                                              const float* bias, const DropoutMask& mask,
                                              MatrixView z, uint16_t* z_bf16) {
    cpu::bias_activation_dropout(act, bias, mask, mat(z), threads_, z_bf16);
}

void CpuBackend::activation_backward_column_sum_impl(const formulas::ActivationParams& act,
                                                     ConstMatrixView a, const DropoutMask* mask,
                                                     MatrixView d, float* column_sums,
                                                     uint16_t* d_bf16) {
    cpu::activation_backward_column_sum(act, cmat(a), mask, mat(d), column_sums, threads_, d_bf16);
}

void CpuBackend::output_epilogue_impl(const formulas::LossParams& loss,
                                      const formulas::ActivationParams& act, const float* bias,
                                      MatrixView z, const CsrBatchView& target, float scale,
                                      MatrixView delta, double* loss_sum, float* row_norms,
                                      uint16_t* delta_bf16) {
    with_scratch(Op::kOutputEpilogue, [&] {
        cpu::output_delta(loss, act, cmat(z), csr(target), scale, mat(delta), loss_sum, row_loss_,
                          threads_, z.data, bias, row_norms, delta_bf16);
    });
}

void CpuBackend::sparseness_penalty_impl(float p, float beta, ConstMatrixView a, float scale,
                                         MatrixView delta, double* loss_sum) {
    with_scratch(Op::kSparsenessPenalty, [&] {
        cpu::sparseness_penalty(p, beta, cmat(a), scale, mat(delta), loss_sum, column_kl_,
                                threads_);
    });
}

void CpuBackend::normalize_rows_impl(float max_norm, MatrixView m) {
    cpu::normalize_rows(max_norm, mat(m), threads_);
}

void CpuBackend::normalize_columns_impl(float max_norm, MatrixView w) {
    cpu::normalize_columns(max_norm, mat(w), threads_);
}

void CpuBackend::row_max_impl(ConstMatrixView m, float* out) {
    cpu::row_max(cmat(m), out, threads_);
}

void CpuBackend::exp_rows_impl(const float* shift, MatrixView m, float* row_sum) {
    cpu::exp_rows(shift, mat(m), row_sum, threads_);
}

void CpuBackend::divide_rows_impl(const float* divisor, MatrixView m) {
    cpu::divide_rows(divisor, mat(m), threads_);
}

void CpuBackend::row_sum_squares_impl(ConstMatrixView m, float* out) {
    cpu::row_sum_squares(cmat(m), out, threads_);
}

void CpuBackend::sum_squares_impl(const std::vector<ConstMatrixView>& parts, float* out) {
    for (size_t i = 0; i < parts.size(); ++i) out[i] = cpu::sum_squares(cmat(parts[i]), threads_);
}

void CpuBackend::clip_rows_impl(float max_norm, const float* sq_norm, MatrixView m) {
    cpu::clip_rows(max_norm, sq_norm, mat(m), threads_);
}

void CpuBackend::add_matrix_impl(float alpha, ConstMatrixView x, float beta, MatrixView y) {
    cpu::add_matrix(alpha, cmat(x), beta, mat(y), threads_);
}

void CpuBackend::scatter_rows_impl(const SparseRowGrad& grad, float beta, MatrixView dense) {
    cpu::scatter_rows(row_grad(grad), beta, mat(dense), threads_);
}

void CpuBackend::optimizer_step_impl(const formulas::OptimizerStep& step, MatrixView w,
                                     ConstMatrixView g, float* state1, float* state2,
                                     uint16_t* w_bf16) {
    cpu::optimizer_step(step, mat(w), cmat(g), state1, state2, threads_, w_bf16);
}

void CpuBackend::round_bf16_impl(ConstMatrixView m, uint16_t* out) {
    cpu::round_bf16_into(cmat(m), out, threads_);
}

void CpuBackend::optimizer_step_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                                          const SparseRowGrad& grad, float* state1, float* state2,
                                          SparseUpdate mode, RowClock clock) {
    with_scratch(Op::kOptimizerStepRows, [&] {
        cpu::optimizer_step_rows(step, mat(w), row_grad(grad), state1, state2, mode, clock,
                                 rows_step_scratch_, threads_);
    });
}

void CpuBackend::catch_up_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                                    const CsrBatchView* x, float* state1, RowClock clock) {
    with_scratch(Op::kCatchUpRows, [&] {
        if (x == nullptr) {
            cpu::catch_up_rows<float>(step, mat(w), nullptr, state1, clock,
                                      rows_step_scratch_.behind, threads_);
        } else {
            const cpu::CsrT<float> c = csr(*x);
            cpu::catch_up_rows(step, mat(w), &c, state1, clock, rows_step_scratch_.behind,
                               threads_);
        }
    });
}

void CpuBackend::top_k_impl(ConstMatrixView scores, const CsrBatchView* exclude, size_t k,
                            float* out_scores, uint32_t* out_indices,
                            const TopKActivation* activation) {
    with_scratch(Op::kTopK, [&] {
        const cpu::RowActivation<float> act =
            activation != nullptr ? cpu::RowActivation<float>{&activation->params, activation->bias}
                                  : cpu::RowActivation<float>{};
        if (exclude != nullptr) {
            const cpu::CsrT<float> ex = csr(*exclude);
            cpu::top_k(cmat(scores), &ex, k, out_scores, out_indices, top_k_scratch_, threads_, act,
                       &top_k_rows_);
        } else {
            cpu::top_k(cmat(scores), static_cast<const cpu::CsrT<float>*>(nullptr), k, out_scores,
                       out_indices, top_k_scratch_, threads_, act, &top_k_rows_);
        }
    });
}

}  // namespace sparsenet
