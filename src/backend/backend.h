// The backend op table: the only seam where the CPU and CUDA backends differ.
// Layers call these ops by name and never choose a device. Shapes and layouts follow the data
// conventions in include/sparsenet/dataset.h (CSR: u64 offsets, u32 indices, optional f32
// values; dense: row-major with a leading dimension). Every pointer an op receives is memory
// of that backend (host memory for the CPU backend, device memory for CUDA).
//
// Model parallelism: ops work on one rank's shard. A CSR view carries `col_offset` (the global
// column of local column 0) and dense ops take views with a leading dimension, so the same ops
// run on a column slice of a layer. Random masks are keyed by (example row, global column), so
// they do not depend on the split, the batch composition or the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/out_of_memory.h"
#include "formulas/activation.h"
#include "formulas/loss.h"
#include "formulas/optimizer.h"
#include "sparsenet/config.h"
#include "sparsenet/device_choice.h"
#include "views.h"  // kernels/views.h: the view types the kernels share

namespace sparsenet {

class Backend;

// The output activation that top_k applies to each score before ranking it (Backend::top_k).
struct TopKActivation {
    formulas::ActivationParams params;  // an element-wise kind (not SoftMax)
    const float* bias = nullptr;        // [cols] in backend memory, or nullptr
};

// Every gemm call, as validated (tests/engine/gemm_shapes_test.cpp records the GEMMs a training
// step and predict issue at the benchmarks' shapes, and what the GPU would run for each).
struct GemmCall {
    const Backend* backend = nullptr;
    bool trans_a = false;
    bool trans_b = false;
    float alpha = 1.0f;
    float beta = 0.0f;
    ConstMatrixView a, b, c;
};
using GemmObserver = void (*)(const GemmCall& call, void* context);
// One observer for the process (nullptr: none, the default); called on the calling thread
// before the GEMM runs. For tests and tools; not synchronised with GEMMs in flight.
void set_gemm_observer(GemmObserver observer, void* context);

class Backend {
  public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;  // "cpu", "cuda:0"

    // ---- precision of gemm (sparsenet/config.h Precision; docs/gpu.md, "Precision") ----
    // The default: the CPU kFp32; CUDA kTf32, or kFp32 when SPARSENET_CUDA_TF32=0 (the fallback
    // of --precision and $.Training.Precision, which the Network sets here when given).
    // kBf16: gemm rounds both operands to BF16 (formulas/precision.h: round to nearest even) and
    // multiplies and sums in FP32. The CPU rounds copies of the operands and calls its FP32 gemm
    // (exact emulation: a product of two BF16 values is exact in FP32); CUDA converts them to
    // BF16 and calls cublasGemmEx with CUBLAS_COMPUTE_32F. An operand whose view carries its
    // BF16 copy (ConstMatrixView::bf16: the engine's weight copies, written by round_bf16 or by
    // optimizer_step's w_bf16) is read from the copy, not rounded again: the same values, one
    // pass over the operand less per GEMM (the CPU widens the copy into its FP32 scratch). kTf32 on
    // the CPU computes kFp32 (no TF32 arithmetic there). Only gemm is affected: csr_matmul and
    // csr_weight_grad (the sparse input layer's products) and every element-wise op stay FP32 on
    // both backends, so that CPU and CUDA agree in every mode.
    void set_precision(Precision p) {
        set_precision_impl(p);
        precision_ = p;
    }
    Precision precision() const { return precision_; }

    // ---- memory (bytes) ----
    virtual void* allocate(size_t bytes,
                           const char* what) = 0;  // throws Error(kDevice) naming what
    virtual void deallocate(void* p) = 0;
    virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
    virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
    virtual void copy(void* dst, const void* src, size_t bytes) = 0;
    virtual void fill(float* dst, size_t n, float value) = 0;
    virtual void synchronize() = 0;
    // Bytes free for new allocations (the memory plan's check, sparsenet train): the host's
    // MemAvailable (/proc/meminfo; 0 when unreadable); a device backend overrides it with its
    // own free memory.
    virtual uint64_t free_memory();

    // ---- compute ----
    // Each op checks its arguments, the same checks with the same messages on every backend
    // (backend.cpp: shapes, leading dimensions, state slots; Error(kInternal) "<op>: <what>"), and
    // then calls the backend's <op>_impl below. What only the data can show (a row id out of
    // range, a count over a capacity) is checked by the implementation: the CPU at the call, a
    // device at its next synchronisation.
    // z = x . w + beta * z.  x: [B, in] CSR batch, w: [in, out], z: [B, out]. A w without FP32
    // data but with a BF16 copy (ConstMatrixView::bf16; Network::keep_bf16_input_weights) is
    // read from the copy: on the CPU bit for bit the FP32 product with the BF16-rounded
    // weights; the CUDA backend refuses it (Error(kNotImplemented)).
    void csr_matmul(const CsrBatchView& x, SparseNoise noise, ConstMatrixView w, MatrixView z,
                    float beta);

    // grad.values[i, :] = alpha * sum over batch rows b that store row id rows[i] of
    // x[b, rows[i]] * dz[b, :]   (overwrite; deterministic: fixed summation order).
    // x: [B, in], dz: [B, out]; grad.capacity >= min(in, nnz of the batch).
    void csr_weight_grad(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz, float alpha,
                         const SparseRowGrad& grad);

    // c = alpha * op(a) . op(b) + beta * c, op(m) = m or m^T. A zero_padded operand's padding
    // may be read as zeros and, in c, overwritten with zeros: the CUDA backend runs the extents
    // of gpu_gemm_extents (backend/gemm_extents.h), the CPU the logical ones.
    // Under kBf16 an operand with bf16 set is read from its BF16 copy (its data may then be
    // nullptr); under kFp32 and kTf32 the copy is ignored and data is required.
    // c_bf16 (nullable): the BF16 copy of the new c (round_bf16's, laid out like c), written by
    // the op that changed c: the weights' copy after an SGD step inside the weight-gradient GEMM.
    // One pass after the GEMM on both backends. Writing it in the GEMM's own pass, in L2-sized
    // panels of c, ran 2x slower on the CPU (oneDNN, dsstne-bench's 1,024 x 27,280 weights: 26-34
    // ms against 16 ms; each panel's rows are a page apart).
    void gemm(bool trans_a, bool trans_b, float alpha, ConstMatrixView a, ConstMatrixView b,
              float beta, MatrixView c, uint16_t* c_bf16 = nullptr);

    // out[r * m.ld + j] := formulas::bf16_bits(m[r, j]) for j < cols, and 0 (BF16 +0) for
    // cols <= j < ld: the BF16 copy of a matrix, laid out like it with its padding zero (so a
    // GEMM may run its extents over the padding, as over the FP32 matrix's). One pass: the
    // engine's weight copies where the update is not a pass of its own (the SGD and Momentum
    // steps inside the weight-gradient GEMM, the sparse steps, WeightNorm) and after a load.
    void round_bf16(ConstMatrixView m, uint16_t* out);

    // BF16 copies of an op's output (out_bf16 below, nullable; issue 46): the ops that produce
    // the activations and deltas a GEMM reads may also write, in the same pass,
    // out_bf16[r * ld + j] = formulas::bf16_bits(the FP32 value they write at [r, j]) for
    // j < cols, laid out like that FP32 output (its ld); the padding [cols, ld) is not written
    // (the caller keeps zeros there, as in the FP32 buffer), so a BF16 GEMM may read the copy in
    // place over its extents (ConstMatrixView::bf16) instead of converting the FP32 values. The
    // copy must not overlap the op's FP32 operands (Error(kInternal)). Any precision: the op
    // only writes it; the engine passes it under Precision::kBf16.

    // In place: z := f(z + bias) row by row. bias: [cols] or nullptr. SoftMax is row-wise.
    // z_bf16 (nullable): the BF16 copy of the new z (above).
    void bias_activation_forward(const formulas::ActivationParams& act, const float* bias,
                                 MatrixView z, uint16_t* z_bf16 = nullptr);

    // In place: d := dL/dz from d = dL/da for element-wise activations (SoftMax is not accepted
    // here: its Jacobian is applied by output_delta).
    //  * mask == nullptr: d := d (.) f'(a).
    //  * mask != nullptr: a holds the activations after that dropout (as forward left them) and
    //    d the gradient with respect to them. Kept units: d := d * scale * f'(x) with
    //    x = dropout_input(a) the activation before dropout; dropped units: d := 0.
    // d_bf16 (nullable): the BF16 copy of the new d.
    void activation_backward(const formulas::ActivationParams& act, ConstMatrixView a,
                             const DropoutMask* mask, MatrixView d, uint16_t* d_bf16 = nullptr);

    // out[c] = alpha * sum_r m[r, c] + beta * out[c].
    void column_sum(ConstMatrixView m, float alpha, float beta, float* out);

    // A hidden layer of a training step (issue 33), each the two ops it names in one pass, bit
    // for bit the same values (tests/backend/hidden_fusion_test.cpp):
    //  * bias_activation_dropout: bias_activation_forward(act, bias, z), then dropout(mask, z);
    //  * activation_backward_column_sum: activation_backward(act, a, mask, d), then
    //    column_sum(d, 1, 0, column_sums) (the bias gradient).
    // z_bf16, d_bf16 (nullable): the BF16 copy of the final z (after the dropout) or d.
    void bias_activation_dropout(const formulas::ActivationParams& act, const float* bias,
                                 const DropoutMask& mask, MatrixView z, uint16_t* z_bf16 = nullptr);
    void activation_backward_column_sum(const formulas::ActivationParams& act, ConstMatrixView a,
                                        const DropoutMask* mask, MatrixView d, float* column_sums,
                                        uint16_t* d_bf16 = nullptr);

    // In place dropout: m[r, c] := kept ? scale * m[r, c] + shift : dropped (mask.params; with
    // inverted dropout m / (1 - p) or 0). mask.params.p <= 0 does nothing. The mask depends only
    // on (seed, example, global column), so activation_backward with the same mask sees it.
    void dropout(const DropoutMask& mask, MatrixView m);

    // delta := scale * w_b * dL/dz for an output layer with activation act and sparse targets
    // (never densified: a zero-target pass over [B, n] plus a correction at stored entries;
    // with loss.ignore_zero only the stored entries count), w_b = target.weights[example(b)]
    // (1 when target.weights is null). SoftMax with multinomial CrossEntropy:
    // delta = a * sum(t) - t with sum(t) = target.row_totals[example(b)] when that is set (the
    // targets are a column band of the row), else the sum of the row's stored values.
    // If loss_sum is not null, *loss_sum += sum over the batch of w_b * (the row's unscaled
    // loss), in double, in a fixed order.
    // a, delta: [B, n]; target: [B, n] CSR batch whose rows hold strictly increasing column ids
    // (each column at most once: the correction at a stored target overwrites delta there).
    // A row breaking that is Error(kInternal) naming the row and column (the CPU at the call,
    // writing nothing; a device at its next synchronisation); datasets never reach it so, since
    // Dataset::validate, the netCDF reader and the trainer refuse repeated columns.
    // delta may be a's storage (the delta written over the activations): every element's delta
    // depends on its own activation and on row statistics taken before anything is written.
    // If row_norms is not null, row_norms[b] = sqrt(sum_j a[b, j]^2) (each row in double, then
    // float; any order): the finite-value guard's check of this layer's activations (NaN when a
    // value is NaN, +inf when one is infinite or the sum overflows), read by
    // Training::record_health instead of a pass of its own over [B, n] (issue 43).
    // delta_bf16 (nullable): the BF16 copy of delta (laid out with delta.ld).
    void output_delta(const formulas::LossParams& loss, const formulas::ActivationParams& act,
                      ConstMatrixView a, const CsrBatchView& target, float scale, MatrixView delta,
                      double* loss_sum, float* row_norms = nullptr, uint16_t* delta_bf16 = nullptr);

    // The output layer of a training step in one pass per row (issue 33): z := f(z + bias) as
    // bias_activation_forward, then delta and *loss_sum as output_delta with a = the new z, each
    // row while it is in cache. The same values bit for bit as those two ops in sequence (the same
    // formulas in the same order: tests/backend/output_epilogue_test.cpp), one read and one write
    // of z less. bias: [n] or nullptr; z, delta: [B, n] (z becomes the activations); target,
    // scale, loss_sum: as output_delta. A target row breaking output_delta's rule is
    // Error(kInternal) before anything is written (CPU; a device at its next synchronisation).
    // delta may be z's storage: z then ends as the delta (the activations are not kept).
    // row_norms: as output_delta's, of the activations f(z + bias). delta_bf16: as output_delta's
    // (of the delta, not of the activations).
    void output_epilogue(const formulas::LossParams& loss, const formulas::ActivationParams& act,
                         const float* bias, MatrixView z, const CsrBatchView& target, float scale,
                         MatrixView delta, double* loss_sum, float* row_norms = nullptr,
                         uint16_t* delta_bf16 = nullptr);

    // Sparseness penalty of a hidden layer (formulas/regularizer.h): rho_j = mean over the rows
    // of a[:, j], clamped; delta[r, j] += scale * beta * KL'(p, rho_j) for every row (0 where
    // the clamp is active)
    // (delta.data == nullptr: loss only). If loss_sum is not null, *loss_sum += rows * beta * sum_j
    // KL(p, rho_j) (the penalty counted once per example, like the losses). Means and sums in
    // double, in a fixed order. a, delta: [B, n].
    void sparseness_penalty(float p, float beta, ConstMatrixView a, float scale, MatrixView delta,
                            double* loss_sum);

    // DeltaNorm: every row of m whose L2 norm exceeds max_norm is scaled to norm max_norm.
    void normalize_rows(float max_norm, MatrixView m);

    // WeightNorm: every column of w (a unit's incoming weights) whose L2 norm exceeds max_norm is
    // scaled to norm max_norm. Norms are summed in double over the rows in order.
    void normalize_columns(float max_norm, MatrixView w);

    // ---- row statistics of a layer split by columns (model parallelism) ----
    // Each rank holds a column band [B, n_p] of the layer; a row-wise op becomes: a local
    // partial statistic per row, an all-reduce of it over the ranks (done by the caller), then
    // an apply pass. SoftMax: row_max -> all-reduce(max) -> exp_rows -> all-reduce(sum) of
    // row_sum -> divide_rows. DeltaNorm: row_sum_squares -> all-reduce(sum) -> clip_rows.
    // Row buffers (out, shift, row_sum, divisor, sq_norm) are [m.rows] floats in backend memory.
    // Padding columns (ld > cols) are never read or written. Each row is reduced by one thread
    // (CPU) or one block (CUDA) in a fixed order: bit-identical on every run.

    // out[r] = max over j < cols of m[r, j]. NaN entries are ignored (the comparison
    // "v > max ? v : max", as the SoftMax's own max shift): a row with no non-NaN entry (cols ==
    // 0, or every entry NaN) gives -inf. (A NaN still poisons the SoftMax: exp_rows turns it
    // into NaN and so the row's sum.)
    void row_max(ConstMatrixView m, float* out);

    // In place: m[r, j] := exp(m[r, j] - shift[r]) (float exp, the SoftMax's formula), and
    // row_sum[r] = sum over j of the new m[r, j], accumulated in double, stored as float (0 for
    // an empty row). With shift = the row's max over all ranks, then divide_rows by the
    // all-reduced row_sum, this is bias_activation_forward's SoftMax (no bias) of the whole
    // row; one rank: the same within 4 ulps (division by the float sum instead of a
    // multiplication by the float reciprocal of the double sum; the exp values are identical).
    void exp_rows(const float* shift, MatrixView m, float* row_sum);

    // In place: m[r, j] := m[r, j] / divisor[r] (IEEE division: a zero divisor gives +-inf or
    // NaN).
    void divide_rows(const float* divisor, MatrixView m);

    // out[r] = sum over j of m[r, j]^2, accumulated in double, stored as float (0 for an empty
    // row).
    void row_sum_squares(ConstMatrixView m, float* out);

    // out[i] = the sum of the squares of every element of parts[i] (rows x cols, padding not
    // read), accumulated in double, stored as float (0 for an empty part): the numerical guard's
    // figures of every layer (bias gradients, activations, biases) in one call, one launch on a
    // GPU instead of one or three per part. Each part's elements are summed in chunks of 8,192
    // (row-major order), the chunks' sums in order: the same bits on every run and thread count.
    void sum_squares(const std::vector<ConstMatrixView>& parts, float* out);

    // DeltaNorm with the squared row norms given: every row r with sq_norm[r] > max_norm^2
    // (compared in double) is scaled by float(max_norm / sqrt(sq_norm[r])) (in double); other
    // rows (NaN sq_norm included) are not written. With sq_norm from row_sum_squares of the same
    // m this is normalize_rows within 4 ulps (the factor comes from the float-rounded squared
    // norm); with sq_norm all-reduced over the ranks, a row split by columns is clipped by its
    // whole norm.
    void clip_rows(float max_norm, const float* sq_norm, MatrixView m);

    // y := alpha * x + beta * y (beta == 0 overwrites y, NaNs included). x, y: [rows, cols].
    // Skip connections: a layer's pre-activation gains the skipped layer's activations, and the
    // skipped layer's gradient gains the layer's delta.
    void add_matrix(float alpha, ConstMatrixView x, float beta, MatrixView y);

    // dense := beta * dense + G, G = grad.values at rows grad.rows and zero elsewhere (beta == 0
    // overwrites every row). dense: [rows, grad.cols]. Accumulates a sparse input's row-sparse
    // weight gradient into the dense gradient of a matrix that several edges share.
    void scatter_rows(const SparseRowGrad& grad, float beta, MatrixView dense);

    // Dense update of w (and its state slots, same shape) with gradient g. w_bf16 (nullable,
    // laid out like w): also receives formulas::bf16_bits of every updated weight in the same
    // pass (its padding is not written), so that a BF16 copy of the weights costs no pass of its
    // own (Precision::kBf16; the weights are what is rounded, bit for bit round_bf16 of the new w).
    void optimizer_step(const formulas::OptimizerStep& step, MatrixView w, ConstMatrixView g,
                        float* state1, float* state2, uint16_t* w_bf16 = nullptr);

    // Update of w from a row-sparse gradient (grad.values at grad.rows, zero elsewhere).
    // SparseUpdate::kExact: the same result as the dense update with that zero-filled gradient
    // (only the touched rows are visited when formulas::zero_gradient_is_noop(step)).
    // SparseUpdate::kLazy: only the touched rows and their state are updated; untouched rows
    // keep their weights and state (docs/config-reference.md, "Sparse updates").
    // clock.last != nullptr (kExact with formulas::catch_up_exact(step) only: Momentum,
    // Nesterov): the exact update in time proportional to the touched rows. Each touched row is
    // first brought to step clock.now - 1 as catch_up_rows does, then updated with its gradient
    // row, and clock.last[r] := clock.now; untouched rows are not visited (catch_up_rows brings
    // them up when they are next read).
    void optimizer_step_rows(const formulas::OptimizerStep& step, MatrixView w,
                             const SparseRowGrad& grad, float* state1, float* state2,
                             SparseUpdate mode, RowClock clock = {});

    // csr_weight_grad(x, noise, dz, alpha, grad) then optimizer_step_rows(step, w, grad, state1,
    // state2, mode, clock): the same weights, state and clocks bit for bit, for the updates that
    // visit the touched rows only (mode kLazy, formulas::zero_gradient_is_noop(step), or a row
    // clock; the every-row exact update is refused). A backend may fuse them, summing each
    // touched row's gradient and applying it at once (the CPU does): grad.rows and *grad.count
    // are written, grad.values is scratch (not the gradient) afterwards. A sparse input's step
    // without the compact gradient written and read back (Network::Impl::update).
    void sparse_step(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz, float alpha,
                     const formulas::OptimizerStep& step, MatrixView w, const SparseRowGrad& grad,
                     float* state1, float* state2, SparseUpdate mode, RowClock clock = {});

    // The closed-form catch-up of the exact sparse update (formulas::catch_up_exact(step) must
    // hold): every row r of w (and state1, laid out like w) named by x (the column ids its batch
    // stores, each once however often; x == nullptr: every row of w) with clock.last[r] <
    // clock.now gets the clock.now - clock.last[r] zero-gradient steps it skipped
    // (formulas::catch_up_coefficients, the same map for every element of the row), and
    // clock.last[r] := clock.now. Rows already at clock.now keep their bits. A row id >= rows
    // is reported like optimizer_step_rows' bad row ids; a clock ahead of clock.now is an
    // internal error on the CPU (a device leaves such a row alone).
    void catch_up_rows(const formulas::OptimizerStep& step, MatrixView w, const CsrBatchView* x,
                       float* state1, RowClock clock);

    // Per row: the k largest scores, excluding the columns stored in that row of `exclude`
    // (nullptr: nothing excluded), in descending order (ties: lower column first). Slots
    // beyond the available columns get score -inf and index UINT32_MAX.
    // scores: [B, n]; out_scores, out_indices: [B, k].
    // activation (nullable): the scores are pre-activations z, and what is ranked and written is
    // f(z + bias), computed as bias_activation_forward computes it (formulas/activation.h, the
    // same code on each backend): the result is bit for bit bias_activation_forward(activation,
    // bias, scores) followed by top_k, without the pass that writes the activations back (predict
    // reads each score row once: issue 45). Element-wise kinds only: SoftMax needs the row's max
    // and sum first and is Error(kInternal) here (apply it with bias_activation_forward).
    void top_k(ConstMatrixView scores, const CsrBatchView* exclude, size_t k, float* out_scores,
               uint32_t* out_indices, const TopKActivation* activation = nullptr);

  protected:
    Precision precision_ = Precision::kFp32;
    // What a backend does on a change of precision (CUDA: the cuBLAS math mode).
    virtual void set_precision_impl(Precision) {}

    // The implementations: called only by the ops above, with arguments already checked.
    virtual void csr_matmul_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView w,
                                 MatrixView z, float beta) = 0;
    virtual void csr_weight_grad_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                                      float alpha, const SparseRowGrad& grad) = 0;
    virtual void gemm_impl(bool trans_a, bool trans_b, float alpha, ConstMatrixView a,
                           ConstMatrixView b, float beta, MatrixView c) = 0;
    // gemm with c's BF16 copy: gemm_impl, then round_bf16_impl(c, c_bf16) by default.
    virtual void gemm_with_copy_impl(bool trans_a, bool trans_b, float alpha, ConstMatrixView a,
                                     ConstMatrixView b, float beta, MatrixView c, uint16_t* c_bf16);
    // out_bf16 / z_bf16 / d_bf16 / delta_bf16: the BF16 copies of the ops above (nullable).
    virtual void bias_activation_forward_impl(const formulas::ActivationParams& act,
                                              const float* bias, MatrixView z,
                                              uint16_t* z_bf16) = 0;
    virtual void activation_backward_impl(const formulas::ActivationParams& act, ConstMatrixView a,
                                          const DropoutMask* mask, MatrixView d,
                                          uint16_t* d_bf16) = 0;
    virtual void column_sum_impl(ConstMatrixView m, float alpha, float beta, float* out) = 0;
    virtual void dropout_impl(const DropoutMask& mask, MatrixView m) = 0;
    virtual void output_delta_impl(const formulas::LossParams& loss,
                                   const formulas::ActivationParams& act, ConstMatrixView a,
                                   const CsrBatchView& target, float scale, MatrixView delta,
                                   double* loss_sum, float* row_norms, uint16_t* delta_bf16) = 0;
    // The unfused composition by default (bias_activation_forward_impl, then output_delta_impl);
    // the CPU and CUDA backends override it with their one-pass versions.
    virtual void output_epilogue_impl(const formulas::LossParams& loss,
                                      const formulas::ActivationParams& act, const float* bias,
                                      MatrixView z, const CsrBatchView& target, float scale,
                                      MatrixView delta, double* loss_sum, float* row_norms,
                                      uint16_t* delta_bf16);
    // The unfused compositions by default; the CPU backend overrides them.
    virtual void bias_activation_dropout_impl(const formulas::ActivationParams& act,
                                              const float* bias, const DropoutMask& mask,
                                              MatrixView z, uint16_t* z_bf16);
    virtual void activation_backward_column_sum_impl(const formulas::ActivationParams& act,
                                                     ConstMatrixView a, const DropoutMask* mask,
                                                     MatrixView d, float* column_sums,
                                                     uint16_t* d_bf16);
    virtual void sparseness_penalty_impl(float p, float beta, ConstMatrixView a, float scale,
                                         MatrixView delta, double* loss_sum) = 0;
    virtual void normalize_rows_impl(float max_norm, MatrixView m) = 0;
    virtual void normalize_columns_impl(float max_norm, MatrixView w) = 0;
    virtual void row_max_impl(ConstMatrixView m, float* out) = 0;
    virtual void exp_rows_impl(const float* shift, MatrixView m, float* row_sum) = 0;
    virtual void divide_rows_impl(const float* divisor, MatrixView m) = 0;
    virtual void row_sum_squares_impl(ConstMatrixView m, float* out) = 0;
    virtual void sum_squares_impl(const std::vector<ConstMatrixView>& parts, float* out) = 0;
    virtual void clip_rows_impl(float max_norm, const float* sq_norm, MatrixView m) = 0;
    virtual void add_matrix_impl(float alpha, ConstMatrixView x, float beta, MatrixView y) = 0;
    virtual void scatter_rows_impl(const SparseRowGrad& grad, float beta, MatrixView dense) = 0;
    virtual void optimizer_step_impl(const formulas::OptimizerStep& step, MatrixView w,
                                     ConstMatrixView g, float* state1, float* state2,
                                     uint16_t* w_bf16) = 0;
    virtual void round_bf16_impl(ConstMatrixView m, uint16_t* out) = 0;
    virtual void optimizer_step_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                                          const SparseRowGrad& grad, float* state1, float* state2,
                                          SparseUpdate mode, RowClock clock) = 0;
    // The composition by default; the CPU backend fuses it.
    virtual void sparse_step_impl(const CsrBatchView& x, SparseNoise noise, ConstMatrixView dz,
                                  float alpha, const formulas::OptimizerStep& step, MatrixView w,
                                  const SparseRowGrad& grad, float* state1, float* state2,
                                  SparseUpdate mode, RowClock clock);
    virtual void catch_up_rows_impl(const formulas::OptimizerStep& step, MatrixView w,
                                    const CsrBatchView* x, float* state1, RowClock clock) = 0;
    virtual void top_k_impl(ConstMatrixView scores, const CsrBatchView* exclude, size_t k,
                            float* out_scores, uint32_t* out_indices,
                            const TopKActivation* activation) = 0;
};

// "cpu", "auto" (CUDA when built and a usable GPU exists, else CPU), "cuda[:N]".
// threads: 0 = all cores (CPU backend).
std::unique_ptr<Backend> make_backend(const std::string& device, int threads = 0);

// Starts the device that make_backend(device) would use, ahead of it (sparsenet::prepare_device).
// Nothing for the CPU; never throws.
void prepare_backend_device(const std::string& device);

// make_backend("auto") reports its choice: sparsenet/device_choice.h.

// Whether this machine shows an NVIDIA GPU, asked of the operating system rather than the CUDA
// runtime, which answers cudaErrorInsufficientDriver both on a machine without a GPU and on one
// whose GPU has no driver or one too old: a GPU listed by a loaded NVIDIA driver
// (/proc/driver/nvidia/gpus), a device node /dev/nvidia0 (a container given a GPU), or a PCI
// display or 3D controller with NVIDIA's vendor id 0x10de (/sys/bus/pci/devices: found even
// without a driver).
bool nvidia_gpu_present();

// The line and kind make_backend("auto") records when it takes the CPU, from what it found:
// whether the machine shows an NVIDIA GPU, whether this build has the CUDA backend, and the CUDA
// runtime's reason for not using one (empty in a build without CUDA). Separate so that every
// case is tested on any machine.
struct AutoChoice {
    std::string line;
    DeviceChoiceKind kind;
};
AutoChoice describe_auto_cpu_choice(bool gpu_present, bool cuda_build, const std::string& why);

// RAII array in backend memory.
template <typename T>
class DeviceArray {
  public:
    DeviceArray() = default;
    DeviceArray(Backend& backend, size_t count, const char* what)
        : backend_(&backend), count_(count) {
        if (count_ > 0) data_ = static_cast<T*>(backend.allocate(count_ * sizeof(T), what));
    }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
    DeviceArray& operator=(DeviceArray&& o) noexcept {
        if (this != &o) {
            release();
            backend_ = o.backend_;
            data_ = o.data_;
            count_ = o.count_;
            o.data_ = nullptr;
            o.count_ = 0;
        }
        return *this;
    }
    ~DeviceArray() { release(); }

    T* data() { return data_; }
    const T* data() const { return data_; }
    size_t size() const { return count_; }
    void upload(const T* host, size_t n) { backend_->upload(data_, host, n * sizeof(T)); }
    void download(T* host, size_t n) const { backend_->download(host, data_, n * sizeof(T)); }

  private:
    void release() {
        if (data_ != nullptr) backend_->deallocate(data_);
        data_ = nullptr;
    }
    Backend* backend_ = nullptr;
    T* data_ = nullptr;
    size_t count_ = 0;
};

}  // namespace sparsenet
