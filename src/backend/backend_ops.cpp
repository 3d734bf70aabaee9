// The front of the op table (backend.h): every op checks its arguments here, once for all
// backends, then calls the backend's <op>_impl. So the CPU and CUDA backends refuse the same
// calls with the same text, and an implementation starts from arguments it can trust (the
// tiny-cuda-nn pattern: validate, then call the implementation).
//
// What is checked: the shapes that must agree, leading dimensions (a view with more than one row
// needs ld >= cols), SoftMax at activation_backward, and the optimizer's state slots. Every
// failure is Error(kInternal) "<op>: <what>": the engine builds these arguments, so a failure is
// a bug in sparsenet, never bad user input (that is refused earlier, naming the file or key).
// Not checked here: what only the data shows (a column or row id out of range, a count over a
// capacity) and an implementation's own limits (BLAS's int dimensions); the implementations
// check those, the CPU at the call and a device at its next synchronisation.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

std::atomic<GemmObserver> g_gemm_observer{nullptr};
std::atomic<void*> g_gemm_observer_context{nullptr};

void check(bool ok, const char* op, const char* what) {
    if (!ok) throw Error(ErrorCategory::kInternal, std::string(op) + ": " + what);
}

// A view whose rows overlap (ld < cols) would read or write another row's elements.
template <class View>
void check_ld(const View& m, const char* op, const char* what) {
    check(m.rows <= 1 || m.ld >= m.cols, op, what);
}

// An op's BF16 copy (out_bf16, laid out like `m`: [rows, ld] with the last row's cols) must not
// overlap the FP32 values the op reads or writes (a copy over them would change them as it is
// written). Compared as byte ranges; a null copy or an empty view checks nothing.
template <class View>
void check_bf16_copy(const uint16_t* out, const View& m, const char* op) {
    if (out == nullptr || m.rows == 0 || m.cols == 0 || m.data == nullptr) return;
    const auto begin = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
    const size_t span = (m.rows - 1) * std::max(m.ld, m.cols) + m.cols;
    const uintptr_t c0 = begin(out), c1 = c0 + span * sizeof(uint16_t);
    const uintptr_t f0 = begin(m.data), f1 = f0 + span * sizeof(float);
    check(c1 <= f0 || f1 <= c0, op, "the BF16 copy overlaps the FP32 values");
}

void check_state(const formulas::OptimizerStep& step, const void* s1, const void* s2,
                 const char* op) {
    const int slots = formulas::optimizer_state_slots(step.kind);
    check(slots < 1 || s1 != nullptr, op, "optimizer state slot 1 is null");
    check(slots < 2 || s2 != nullptr, op, "optimizer state slot 2 is null");
}

// SPARSENET_OP_TIMES=1: the wall time, calls and (gemm) FLOPs of every op, summed over the process
// and printed to stderr at its exit: where an epoch's time goes against its GEMM time
// (docs/benchmarks.md). Meaningful on the CPU backend, whose ops return when done; a device
// backend's ops only enqueue. Off: one branch per op.
struct OpTimes {
    bool on = [] {
        const char* v = std::getenv("SPARSENET_OP_TIMES");
        return v != nullptr && *v != '\0' && std::string(v) != "0";
    }();
    static constexpr size_t kOps = size_t(Op::kRoundBf16) + 1;  // the last op of views.h
    std::array<std::atomic<uint64_t>, kOps> ns{}, calls{};
    std::array<std::atomic<double>, kOps> flop{};
    ~OpTimes() {
        if (!on) return;
        double total = 0.0;
        for (size_t i = 0; i < kOps; ++i) total += double(ns[i].load()) * 1e-9;
        std::fprintf(stderr, "sparsenet op times (SPARSENET_OP_TIMES): %.3f s in ops\n", total);
        for (size_t i = 0; i < kOps; ++i) {
            if (calls[i].load() == 0) continue;
            const double s = double(ns[i].load()) * 1e-9;
            std::fprintf(stderr, "  %-24s %9.3f s %6.1f %% %8llu calls", to_string(Op(i)), s,
                         total > 0 ? 100.0 * s / total : 0.0, (unsigned long long)calls[i].load());
            if (flop[i].load() > 0 && s > 0)
                std::fprintf(stderr, " %8.1f GFLOP/s", flop[i].load() / s * 1e-9);
            std::fprintf(stderr, "\n");
        }
    }
};
OpTimes g_op_times;

class OpTimer {
  public:
    OpTimer(Op op, double flop) : op_(op), flop_(flop) {
        if (g_op_times.on) start_ = std::chrono::steady_clock::now();
    }
    ~OpTimer() {
        if (!g_op_times.on) return;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now() - start_);
        const size_t i = size_t(op_);
        g_op_times.ns[i] += uint64_t(ns.count());
        g_op_times.calls[i] += 1;
        double f = g_op_times.flop[i].load();
        while (!g_op_times.flop[i].compare_exchange_weak(f, f + flop_)) {
        }
    }
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

  private:
    Op op_;
    double flop_;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace

void set_gemm_observer(GemmObserver observer, void* context) {
    g_gemm_observer_context.store(context);
    g_gemm_observer.store(observer);
}

void Backend::csr_matmul(const CsrBatchView& x, SparseNoise noise, ConstMatrixView w, MatrixView z,
                         float beta) {
    check(z.rows == x.batch.batch, "csr_matmul", "rows of z != batch size");
    check(w.cols == z.cols, "csr_matmul", "columns of w != columns of z");
    check(w.rows >= x.cols, "csr_matmul", "rows of w < input width");
    check(w.data != nullptr || w.bf16 != nullptr, "csr_matmul", "w has neither FP32 nor BF16 data");
    check_ld(w, "csr_matmul", "ld of w < its columns");
    check_ld(z, "csr_matmul", "ld of z < its columns");
    const OpTimer timer(Op::kCsrMatmul, 0.0);
    csr_matmul_impl(x, noise, w, z, beta);
}

void Backend::csr_weight_grad(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                              float alpha, const SparseRowGrad& grad) {
    check(dz.rows == x.batch.batch, "csr_weight_grad", "rows of dz != batch size");
    check(grad.cols == dz.cols, "csr_weight_grad", "gradient width != columns of dz");
    check_ld(dz, "csr_weight_grad", "ld of dz < its columns");
    const OpTimer timer(Op::kCsrWeightGrad, 0.0);
    csr_weight_grad_impl(x, noise, dz, alpha, grad);
}

void Backend::gemm(bool trans_a, bool trans_b, float alpha, ConstMatrixView a, ConstMatrixView b,
                   float beta, MatrixView c, uint16_t* c_bf16) {
    const size_t m = c.rows, n = c.cols;
    const size_t k = trans_a ? a.rows : a.cols;
    check((trans_a ? a.cols : a.rows) == m, "gemm", "rows of op(a) != rows of c");
    check((trans_b ? b.cols : b.rows) == k, "gemm", "inner dimensions of op(a), op(b) differ");
    check((trans_b ? b.rows : b.cols) == n, "gemm", "columns of op(b) != columns of c");
    check(a.ld >= a.cols && b.ld >= b.cols && c.ld >= c.cols, "gemm", "ld < cols");
    // An operand kept only in BF16 (data nullptr) can be read only by a BF16 GEMM.
    const bool bf16 = precision_ == Precision::kBf16;
    check(((a.data != nullptr || (bf16 && a.bf16 != nullptr)) &&
           (b.data != nullptr || (bf16 && b.bf16 != nullptr))) ||
              m == 0 || n == 0 || k == 0,
          "gemm", "an operand held only in BF16 outside Precision::kBf16");
    if (GemmObserver observer = g_gemm_observer.load()) {
        observer(GemmCall{this, trans_a, trans_b, alpha, beta, a, b, c},
                 g_gemm_observer_context.load());
    }
    check_bf16_copy(c_bf16, c, "gemm");
    const OpTimer timer(Op::kGemm, 2.0 * double(m) * double(n) * double(k));
    if (c_bf16 == nullptr) {
        gemm_impl(trans_a, trans_b, alpha, a, b, beta, c);
    } else {
        gemm_with_copy_impl(trans_a, trans_b, alpha, a, b, beta, c, c_bf16);
    }
}

void Backend::gemm_with_copy_impl(bool trans_a, bool trans_b, float alpha, ConstMatrixView a,
                                  ConstMatrixView b, float beta, MatrixView c, uint16_t* c_bf16) {
    gemm_impl(trans_a, trans_b, alpha, a, b, beta, c);
    round_bf16_impl(c, c_bf16);
}

void Backend::bias_activation_forward(const formulas::ActivationParams& act, const float* bias,
                                      MatrixView z, uint16_t* z_bf16) {
    check_ld(z, "bias_activation_forward", "ld of z < its columns");
    check_bf16_copy(z_bf16, z, "bias_activation_forward");
    const OpTimer timer(Op::kBiasActivationForward, 0.0);
    bias_activation_forward_impl(act, bias, z, z_bf16);
}

void Backend::activation_backward(const formulas::ActivationParams& act, ConstMatrixView a,
                                  const DropoutMask* mask, MatrixView d, uint16_t* d_bf16) {
    check(act.kind != Activation::kSoftMax, "activation_backward",
          "SoftMax is applied by output_delta, not here");
    check(a.rows == d.rows && a.cols == d.cols, "activation_backward", "shapes of a and d differ");
    check(mask == nullptr || mask->rows.batch == d.rows, "activation_backward",
          "mask batch size != rows of d");
    check_ld(a, "activation_backward", "ld of a < its columns");
    check_ld(d, "activation_backward", "ld of d < its columns");
    check_bf16_copy(d_bf16, d, "activation_backward");
    check_bf16_copy(d_bf16, a, "activation_backward");
    const OpTimer timer(Op::kActivationBackward, 0.0);
    activation_backward_impl(act, a, mask, d, d_bf16);
}

void Backend::column_sum(ConstMatrixView m, float alpha, float beta, float* out) {
    check_ld(m, "column_sum", "ld of m < its columns");
    const OpTimer timer(Op::kColumnSum, 0.0);
    column_sum_impl(m, alpha, beta, out);
}

void Backend::bias_activation_dropout(const formulas::ActivationParams& act, const float* bias,
                                      const DropoutMask& mask, MatrixView z, uint16_t* z_bf16) {
    const bool active = mask.params.p > 0.0f && z.rows > 0 && z.cols > 0;
    check(!active || mask.rows.batch == z.rows, "bias_activation_dropout",
          "mask batch size != rows of z");
    check_ld(z, "bias_activation_dropout", "ld of z < its columns");
    check_bf16_copy(z_bf16, z, "bias_activation_dropout");
    const OpTimer timer(Op::kBiasActivationDropout, 0.0);
    bias_activation_dropout_impl(act, bias, mask, z, z_bf16);
}

void Backend::bias_activation_dropout_impl(const formulas::ActivationParams& act, const float* bias,
                                           const DropoutMask& mask, MatrixView z,
                                           uint16_t* z_bf16) {
    const bool drop = mask.params.p > 0.0f;
    bias_activation_forward_impl(act, bias, z, drop ? nullptr : z_bf16);
    dropout_impl(mask, z);
    if (drop && z_bf16 != nullptr) round_bf16_impl(z, z_bf16);  // the padding: zeros, as kept
}

void Backend::activation_backward_column_sum(const formulas::ActivationParams& act,
                                             ConstMatrixView a, const DropoutMask* mask,
                                             MatrixView d, float* column_sums, uint16_t* d_bf16) {
    const char* op = "activation_backward_column_sum";
    check(act.kind != Activation::kSoftMax, op, "SoftMax is applied by output_delta, not here");
    check(a.rows == d.rows && a.cols == d.cols, op, "shapes of a and d differ");
    check(mask == nullptr || mask->rows.batch == d.rows, op, "mask batch size != rows of d");
    check_ld(a, op, "ld of a < its columns");
    check_ld(d, op, "ld of d < its columns");
    check_bf16_copy(d_bf16, d, op);
    check_bf16_copy(d_bf16, a, op);
    const OpTimer timer(Op::kActivationBackwardColumnSum, 0.0);
    activation_backward_column_sum_impl(act, a, mask, d, column_sums, d_bf16);
}

void Backend::activation_backward_column_sum_impl(const formulas::ActivationParams& act,
                                                  ConstMatrixView a, const DropoutMask* mask,
                                                  MatrixView d, float* column_sums,
                                                  uint16_t* d_bf16) {
    activation_backward_impl(act, a, mask, d, d_bf16);
    column_sum_impl(d, 1.0f, 0.0f, column_sums);
}

void Backend::dropout(const DropoutMask& mask, MatrixView m) {
    // p <= 0 is a no-op whatever the mask holds (callers pass an empty mask then).
    const bool active = mask.params.p > 0.0f && m.rows > 0 && m.cols > 0;
    check(!active || mask.rows.batch == m.rows, "dropout", "mask batch size != rows of m");
    check_ld(m, "dropout", "ld of m < its columns");
    const OpTimer timer(Op::kDropout, 0.0);
    dropout_impl(mask, m);
}

void Backend::output_delta(const formulas::LossParams& loss, const formulas::ActivationParams& act,
                           ConstMatrixView a, const CsrBatchView& target, float scale,
                           MatrixView delta, double* loss_sum, float* row_norms,
                           uint16_t* delta_bf16) {
    check(a.rows == delta.rows && a.cols == delta.cols, "output_delta",
          "shapes of a and delta differ");
    check(target.batch.batch == a.rows, "output_delta", "target batch size != rows of a");
    check(target.cols <= a.cols, "output_delta", "target width > columns of a");
    check_ld(a, "output_delta", "ld of a < its columns");
    check_ld(delta, "output_delta", "ld of delta < its columns");
    check_bf16_copy(delta_bf16, delta, "output_delta");
    check_bf16_copy(delta_bf16, a, "output_delta");
    const OpTimer timer(Op::kOutputDelta, 0.0);
    output_delta_impl(loss, act, a, target, scale, delta, loss_sum, row_norms, delta_bf16);
}

void Backend::output_epilogue(const formulas::LossParams& loss,
                              const formulas::ActivationParams& act, const float* bias,
                              MatrixView z, const CsrBatchView& target, float scale,
                              MatrixView delta, double* loss_sum, float* row_norms,
                              uint16_t* delta_bf16) {
    check(z.rows == delta.rows && z.cols == delta.cols, "output_epilogue",
          "shapes of z and delta differ");
    check(target.batch.batch == z.rows, "output_epilogue", "target batch size != rows of z");
    check(target.cols <= z.cols, "output_epilogue", "target width > columns of z");
    check_ld(z, "output_epilogue", "ld of z < its columns");
    check_ld(delta, "output_epilogue", "ld of delta < its columns");
    check_bf16_copy(delta_bf16, delta, "output_epilogue");
    check_bf16_copy(delta_bf16, z, "output_epilogue");
    const OpTimer timer(Op::kOutputEpilogue, 0.0);
    output_epilogue_impl(loss, act, bias, z, target, scale, delta, loss_sum, row_norms, delta_bf16);
}

void Backend::output_epilogue_impl(const formulas::LossParams& loss,
                                   const formulas::ActivationParams& act, const float* bias,
                                   MatrixView z, const CsrBatchView& target, float scale,
                                   MatrixView delta, double* loss_sum, float* row_norms,
                                   uint16_t* delta_bf16) {
    bias_activation_forward_impl(act, bias, z, nullptr);
    output_delta_impl(loss, act, z, target, scale, delta, loss_sum, row_norms, delta_bf16);
}

void Backend::sparseness_penalty(float p, float beta, ConstMatrixView a, float scale,
                                 MatrixView delta, double* loss_sum) {
    check(delta.data == nullptr || (delta.rows == a.rows && delta.cols == a.cols),
          "sparseness_penalty", "shapes of a and delta differ");
    check_ld(a, "sparseness_penalty", "ld of a < its columns");
    const OpTimer timer(Op::kSparsenessPenalty, 0.0);
    sparseness_penalty_impl(p, beta, a, scale, delta, loss_sum);
}

void Backend::normalize_rows(float max_norm, MatrixView m) {
    check_ld(m, "normalize_rows", "ld of m < its columns");
    const OpTimer timer(Op::kNormalizeRows, 0.0);
    normalize_rows_impl(max_norm, m);
}

void Backend::normalize_columns(float max_norm, MatrixView w) {
    check_ld(w, "normalize_columns", "ld of w < its columns");
    const OpTimer timer(Op::kNormalizeColumns, 0.0);
    normalize_columns_impl(max_norm, w);
}

void Backend::row_max(ConstMatrixView m, float* out) {
    check_ld(m, "row_max", "ld of m < its columns");
    const OpTimer timer(Op::kRowMax, 0.0);
    row_max_impl(m, out);
}

void Backend::exp_rows(const float* shift, MatrixView m, float* row_sum) {
    check_ld(m, "exp_rows", "ld of m < its columns");
    const OpTimer timer(Op::kExpRows, 0.0);
    exp_rows_impl(shift, m, row_sum);
}

void Backend::divide_rows(const float* divisor, MatrixView m) {
    check_ld(m, "divide_rows", "ld of m < its columns");
    const OpTimer timer(Op::kDivideRows, 0.0);
    divide_rows_impl(divisor, m);
}

void Backend::row_sum_squares(ConstMatrixView m, float* out) {
    check_ld(m, "row_sum_squares", "ld of m < its columns");
    const OpTimer timer(Op::kRowSumSquares, 0.0);
    row_sum_squares_impl(m, out);
}

void Backend::sum_squares(const std::vector<ConstMatrixView>& parts, float* out) {
    for (const ConstMatrixView& m : parts) check_ld(m, "sum_squares", "ld of a part < its columns");
    check(parts.empty() || out != nullptr, "sum_squares", "no output for the parts");
    const OpTimer timer(Op::kSumSquares, 0.0);
    if (!parts.empty()) sum_squares_impl(parts, out);
}

void Backend::clip_rows(float max_norm, const float* sq_norm, MatrixView m) {
    check_ld(m, "clip_rows", "ld of m < its columns");
    const OpTimer timer(Op::kClipRows, 0.0);
    clip_rows_impl(max_norm, sq_norm, m);
}

void Backend::add_matrix(float alpha, ConstMatrixView x, float beta, MatrixView y) {
    check(x.rows == y.rows && x.cols == y.cols, "add_matrix", "shapes of x and y differ");
    check_ld(x, "add_matrix", "ld of x < its columns");
    check_ld(y, "add_matrix", "ld of y < its columns");
    const OpTimer timer(Op::kAddMatrix, 0.0);
    add_matrix_impl(alpha, x, beta, y);
}

void Backend::scatter_rows(const SparseRowGrad& grad, float beta, MatrixView dense) {
    check(grad.cols == dense.cols, "scatter_rows", "gradient width != dense width");
    check_ld(dense, "scatter_rows", "ld of dense < its columns");
    const OpTimer timer(Op::kScatterRows, 0.0);
    scatter_rows_impl(grad, beta, dense);
}

void Backend::optimizer_step(const formulas::OptimizerStep& step, MatrixView w, ConstMatrixView g,
                             float* state1, float* state2, uint16_t* w_bf16) {
    check(g.rows == w.rows && g.cols == w.cols, "optimizer_step", "shapes of w and g differ");
    check_state(step, state1, state2, "optimizer_step");
    check_ld(w, "optimizer_step", "ld of w < its columns");
    check_ld(g, "optimizer_step", "ld of g < its columns");
    const OpTimer timer(Op::kOptimizerStep, 0.0);
    optimizer_step_impl(step, w, g, state1, state2, w_bf16);
}

void Backend::round_bf16(ConstMatrixView m, uint16_t* out) {
    check_ld(m, "round_bf16", "ld of m < its columns");
    check(out != nullptr || m.rows == 0 || m.ld == 0, "round_bf16", "the BF16 output is null");
    const OpTimer timer(Op::kRoundBf16, 0.0);
    round_bf16_impl(m, out);
}

void Backend::optimizer_step_rows(const formulas::OptimizerStep& step, MatrixView w,
                                  const SparseRowGrad& grad, float* state1, float* state2,
                                  SparseUpdate mode, RowClock clock) {
    check(grad.cols == w.cols, "optimizer_step_rows", "gradient width != weight width");
    check_state(step, state1, state2, "optimizer_step_rows");
    check_ld(w, "optimizer_step_rows", "ld of w < its columns");
    if (clock.last != nullptr) {
        check(mode == SparseUpdate::kExact && formulas::catch_up_exact(step, true),
              "optimizer_step_rows", "a row clock needs an exact Momentum or Nesterov step");
        check(clock.now > 0, "optimizer_step_rows", "a row clock's step must be positive");
    }
    const OpTimer timer(Op::kOptimizerStepRows, 0.0);
    optimizer_step_rows_impl(step, w, grad, state1, state2, mode, clock);
}

void Backend::sparse_step(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz, float alpha,
                          const formulas::OptimizerStep& step, MatrixView w,
                          const SparseRowGrad& grad, float* state1, float* state2,
                          SparseUpdate mode, RowClock clock) {
    const char* op = "sparse_step";
    check(dz.rows == x.batch.batch, op, "rows of dz != batch size");
    check(grad.cols == dz.cols, op, "gradient width != columns of dz");
    check(grad.cols == w.cols, op, "gradient width != weight width");
    check(x.cols <= w.rows, op, "rows of w < input width");
    check_ld(dz, op, "ld of dz < its columns");
    check_ld(w, op, "ld of w < its columns");
    check_state(step, state1, state2, op);
    if (clock.last != nullptr) {
        check(mode == SparseUpdate::kExact && formulas::catch_up_exact(step, true), op,
              "a row clock needs an exact Momentum or Nesterov step");
        check(clock.now > 0, op, "a row clock's step must be positive");
    } else {
        check(mode == SparseUpdate::kLazy || formulas::zero_gradient_is_noop(step), op,
              "the every-row exact update is not a touched-rows step");
    }
    const OpTimer timer(Op::kSparseStep, 0.0);
    sparse_step_impl(x, noise, dz, alpha, step, w, grad, state1, state2, mode, clock);
}

void Backend::sparse_step_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                               float alpha, const formulas::OptimizerStep& step, MatrixView w,
                               const SparseRowGrad& grad, float* state1, float* state2,
                               SparseUpdate mode, RowClock clock) {
    csr_weight_grad_impl(x, noise, dz, alpha, grad);
    optimizer_step_rows_impl(step, w, grad, state1, state2, mode, clock);
}

void Backend::catch_up_rows(const formulas::OptimizerStep& step, MatrixView w,
                            const CsrBatchView* x, float* state1, RowClock clock) {
    check(formulas::catch_up_exact(step, true), "catch_up_rows",
          "only Momentum and Nesterov without L1 have a closed-form catch-up");
    check(clock.last != nullptr || w.rows == 0, "catch_up_rows", "no row clock");
    check_state(step, state1, nullptr, "catch_up_rows");
    check_ld(w, "catch_up_rows", "ld of w < its columns");
    check(x == nullptr || x->cols <= w.rows, "catch_up_rows", "rows of w < input width");
    const OpTimer timer(Op::kCatchUpRows, 0.0);
    catch_up_rows_impl(step, w, x, state1, clock);
}

void Backend::top_k(ConstMatrixView scores, const CsrBatchView* exclude, size_t k,
                    float* out_scores, uint32_t* out_indices, const TopKActivation* activation) {
    if (scores.rows > 0 && k > 0) {  // nothing to rank: a no-op whatever the rest holds
        check(scores.cols <= size_t(UINT32_MAX), "top_k", "too many columns");
        check(exclude == nullptr || exclude->batch.batch == scores.rows, "top_k",
              "exclusion batch size != rows of scores");
        check_ld(scores, "top_k", "ld of scores < its columns");
        check(activation == nullptr || activation->params.kind != Activation::kSoftMax, "top_k",
              "SoftMax is row-wise: apply it with bias_activation_forward first");
    }
    const OpTimer timer(Op::kTopK, 0.0);
    top_k_impl(scores, exclude, k, out_scores, out_indices, activation);
}

}  // namespace sparsenet
