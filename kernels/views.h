// The view types that the backends (src/backend) and the kernels (kernels/) share: dense
// matrices with a leading dimension, batches of a resident CSR matrix, the masks and sparse
// gradients the ops exchange, and the op names that errors carry. Plain structs of pointers and
// sizes, so that a kernel receives them by value; every pointer is memory of the backend that
// runs the op (host memory for the CPU backend, device memory for CUDA). The conventions they
// follow are written once in src/backend/backend.h (the op table) and
// include/sparsenet/dataset.h (CSR: u64 offsets, u32 indices, optional f32 values).
//
// Lives in kernels/ because kernels include nothing from src/: the arrow points from the
// backends to the kernels, never back.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formulas/dropout.h"

namespace sparsenet {

struct MatrixView {  // [rows, cols], row-major, leading dimension ld >= cols
    float* data = nullptr;
    size_t rows = 0;
    size_t cols = 0;
    size_t ld = 0;
    // Columns [cols, ld) of every row hold zeros (the engine's padded rows, engine::padded_ld):
    // a GEMM may run its extent over them, reading them as zeros and, in its output, writing
    // zeros there (src/backend/gemm_extents.h). Every other op reads and writes [0, cols) only.
    bool zero_padded = false;
    float* row(size_t r) const { return data + r * ld; }
};

struct ConstMatrixView {
    const float* data = nullptr;
    size_t rows = 0;
    size_t cols = 0;
    size_t ld = 0;
    bool zero_padded = false;  // as MatrixView::zero_padded
    // The same matrix rounded to BF16 (formulas::bf16_bits), laid out like data (the same ld,
    // zeros in the padding), or nullptr. Only gemm under Precision::kBf16 reads it, instead of
    // rounding data itself: the engine's weight copies, written once per step where the FP32
    // master is updated (engine::EdgeParams::w_bf16). With bf16 set, data may be nullptr (an
    // inference network that keeps only the BF16 weights); every other op needs data.
    const uint16_t* bf16 = nullptr;
    ConstMatrixView() = default;
    ConstMatrixView(const float* d, size_t r, size_t c, size_t l, bool padded = false,
                    const uint16_t* b16 = nullptr)
        : data(d), rows(r), cols(c), ld(l), zero_padded(padded), bf16(b16) {}
    ConstMatrixView(const MatrixView& m)
        : data(m.data), rows(m.rows), cols(m.cols), ld(m.ld), zero_padded(m.zero_padded) {}
    const float* row(size_t r) const { return data + r * ld; }
};

// The examples of one batch: batch row r is dataset row rows[r], or first_row + r when rows is
// null. Only this index list moves per batch; examples stay where the dataset was uploaded.
struct BatchRows {
    const uint32_t* rows = nullptr;  // [batch] backend memory, or nullptr
    uint64_t first_row = 0;
    size_t batch = 0;
};

// A batch of rows of a resident CSR matrix.
struct CsrBatchView {
    const uint64_t* offsets = nullptr;  // [matrix rows + 1]
    const uint32_t* indices = nullptr;  // [nnz], local column ids < cols
    const float* values = nullptr;      // [nnz], or nullptr: every stored entry is 1
    // [matrix rows] per-example weights (DSSTNE's dataWeight), or nullptr: every weight is 1.
    // Only output_delta reads them (the weight of a target row scales its loss and delta).
    const float* weights = nullptr;
    // [matrix rows] the sum of the stored values of each row over all columns of the full row,
    // when this view holds only a column band of it (model parallelism); nullptr: the stored
    // entries of this view are the whole row. Only the multinomial CrossEntropy path of
    // output_delta reads it (its target sum, a * sum(t) - t, needs the whole row's sum).
    const float* row_totals = nullptr;
    BatchRows batch;
    uint32_t cols = 0;        // local width
    uint32_t col_offset = 0;  // global column of local column 0
};

// Drop each stored input entry with probability p (inverted: survivors scaled by 1/(1-p)).
struct SparseNoise {
    float p = 0.0f;
    uint64_t seed = 0;
};

// A dropout mask over a [batch, cols] block of one layer: unit (r, c) is kept iff
// keep_unit(params.seed, example(r), col_offset + c, params.p); kept and dropped units map as
// formulas/dropout.h says (inverted dropout, or alpha dropout for ELU/SELU layers).
struct DropoutMask {
    formulas::DropoutParams params;
    BatchRows rows;
    uint32_t col_offset = 0;  // global column of local column 0
};

// Gradient of a weight matrix restricted to the rows a sparse batch touched.
// rows[0..*count) are sorted, unique row ids; values is [capacity, cols] with row i holding
// the gradient of W row rows[i]. count lives in backend memory (no host sync needed).
struct SparseRowGrad {
    uint32_t* rows = nullptr;   // [capacity]
    uint32_t* count = nullptr;  // [1]
    float* values = nullptr;    // [capacity, cols], ld = cols
    size_t capacity = 0;
    size_t cols = 0;
};

// The per-row step clock of a matrix whose exact sparse update catches skipped steps up in
// closed form (formulas::catch_up_exact: Momentum, Nesterov): row r of the weights and of the
// optimizer state is current as of optimizer step last[r] ([rows], backend memory); now: the
// step the op brings rows to. last == nullptr: no clock (the every-row exact path).
struct RowClock {
    uint32_t* last = nullptr;
    uint32_t now = 0;
};

enum class Op {
    kCsrMatmul,
    kCsrWeightGrad,
    kGemm,
    kBiasActivationForward,
    kActivationBackward,
    kColumnSum,
    kDropout,
    kOutputDelta,
    kOptimizerStep,
    kOptimizerStepRows,
    kTopK,
    kSparsenessPenalty,
    kNormalizeRows,
    kNormalizeColumns,
    kAddMatrix,
    kScatterRows,
    kRowMax,
    kExpRows,
    kDivideRows,
    kRowSumSquares,
    kClipRows,
    kOutputEpilogue,
    kBiasActivationDropout,
    kActivationBackwardColumnSum,
    kSumSquares,
    kSparseStep,
    kCatchUpRows,
    kRoundBf16,  // the last: backend_ops.cpp's op-time table and op_checks_test count to it
};
const char* to_string(Op op);

}  // namespace sparsenet
