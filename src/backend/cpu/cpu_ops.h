// The CPU implementations of the backend op table, as templates on the scalar type T (float for
// the backend, double for the gradient checks). Every op takes plain views (below) and a thread
// count; the scratch buffers an op needs are passed in by the caller and only grow, so a warm
// caller allocates nothing per batch. The element-wise maths comes from kernels/formulas/.
//
// Parallelism: OpenMP loops over rows (static when every row costs the same, dynamic where row
// lengths follow a power law). Each output element is computed by one thread in a fixed order,
// so every result is bit-identical whatever the thread count. BLAS is called only outside
// parallel regions.
//
// This header holds the views, the scratch structs and the shared helpers; the ops themselves
// are in cpu_ops_dense.h and cpu_ops_sparse.h, included at the end.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "formulas/activation.h"
#include "formulas/dropout.h"
#include "formulas/loss.h"
#include "formulas/optimizer.h"
#include "formulas/regularizer.h"
#include "formulas/rng.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"

// Vector variants of the transcendental functions the formulas call. glibc's libmvec provides
// them (linked through libm), but <math.h> only announces them under -ffast-math; declaring
// them here lets the `omp simd` loops below call 16-wide AVX-512 exp/log/tanh instead of one
// scalar call per element (libmvec is accurate to a few ulp).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    !defined(SPARSENET_NO_LIBMVEC)
extern "C" {
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
__attribute__((simd("notinbranch"))) float logf(float) noexcept;
__attribute__((simd("notinbranch"))) float tanhf(float) noexcept;
__attribute__((simd("notinbranch"))) double exp(double) noexcept;
__attribute__((simd("notinbranch"))) double log(double) noexcept;
__attribute__((simd("notinbranch"))) double tanh(double) noexcept;
}
// expm1 / log1p (ELU, SELU, SoftPlus) joined libmvec in glibc 2.35.
#if __GLIBC_PREREQ(2, 35)
extern "C" {
__attribute__((simd("notinbranch"))) float expm1f(float) noexcept;
__attribute__((simd("notinbranch"))) float log1pf(float) noexcept;
__attribute__((simd("notinbranch"))) double expm1(double) noexcept;
__attribute__((simd("notinbranch"))) double log1p(double) noexcept;
}
#endif
#endif

namespace sparsenet::cpu {

// ---- views ----

// [rows, cols], row-major, leading dimension ld >= cols.
template <class T>
struct MatT {
    T* data = nullptr;
    size_t rows = 0;
    size_t cols = 0;
    size_t ld = 0;
    T* row(size_t r) const { return data + r * ld; }
};

template <class T>
struct CMatT {
    const T* data = nullptr;
    size_t rows = 0;
    size_t cols = 0;
    size_t ld = 0;
    CMatT() = default;
    CMatT(const T* d, size_t r, size_t c, size_t l) : data(d), rows(r), cols(c), ld(l) {}
    CMatT(const MatT<T>& m) : data(m.data), rows(m.rows), cols(m.cols), ld(m.ld) {}
    const T* row(size_t r) const { return data + r * ld; }
};

// A batch of rows of a resident CSR matrix (CsrBatchView with values of type T).
template <class T>
struct CsrT {
    const uint64_t* offsets = nullptr;  // [matrix rows + 1]
    const uint32_t* indices = nullptr;  // [nnz], local column ids < cols
    const T* values = nullptr;          // [nnz], or nullptr: every stored entry is 1
    const T* weights = nullptr;         // [matrix rows] example weights, or nullptr (all 1)
    const T* row_totals = nullptr;      // [matrix rows] whole-row target sums, or nullptr
    const uint32_t* rows = nullptr;     // [batch] example ids, or nullptr: first_row + b
    uint64_t first_row = 0;
    size_t batch = 0;
    uint32_t cols = 0;
    uint32_t col_offset = 0;

    uint64_t example(size_t b) const { return rows != nullptr ? uint64_t(rows[b]) : first_row + b; }
    uint64_t begin(size_t b) const { return offsets[example(b)]; }
    uint64_t end(size_t b) const { return offsets[example(b) + 1]; }
    T value(uint64_t e) const { return values != nullptr ? values[e] : T(1); }
    T weight(size_t b) const { return weights != nullptr ? weights[example(b)] : T(1); }
};

// SparseRowGrad with values of type T.
template <class T>
struct RowGradT {
    uint32_t* rows = nullptr;   // [capacity]
    uint32_t* count = nullptr;  // [1]
    T* values = nullptr;        // [capacity, cols], ld = cols
    size_t capacity = 0;
    size_t cols = 0;
};

// ---- scratch (owned by the caller, reused across calls) ----

template <class T>
struct WeightGradScratch {
    std::vector<uint32_t> col_count;   // [in]; all zero between calls
    std::vector<uint32_t> unique;      // touched columns, sorted
    std::vector<uint64_t> starts;      // [unique + 1] offsets into the sorted entries
    std::vector<uint8_t> kept;         // [nnz] noise mask of the batch entries, in CSR order
    std::vector<uint32_t> sorted_row;  // [nnz] kept entries sorted by (column, batch row)
    std::vector<T> sorted_coef;
    std::vector<T> step_rows;  // sparse_step: one gradient row per thread
};

template <class T>
struct RowsStepScratch {
    std::vector<uint32_t> row_map;  // [w rows]; UINT32_MAX between calls
    std::vector<T> zero_row;        // [cols] zeros
    std::vector<uint64_t> behind;   // catch_up_rows: (row << 32 | skipped steps) per row
};

template <class T>
struct ScoreIndex {
    T score;
    uint32_t index;
};

// ---- helpers ----

// Grows v to at least n elements (new elements = fill); never shrinks, so warm calls do not
// allocate.
template <class V>
inline void grow(V& v, size_t n, typename V::value_type fill = typename V::value_type()) {
    if (v.size() < n) v.resize(n, fill);
}

// Work (elements touched) below which a loop stays on the calling thread.
constexpr size_t kMinParallelWork = 16384;

inline bool parallel_worth(size_t work, int threads) {
    return threads > 1 && work >= kMinParallelWork;
}

// Splits [rows, cols] work into rows x blocks tasks so that a small batch still feeds every
// thread: one block per row when there are enough rows, else column blocks of >= 256 elements
// (multiples of 16 so blocks stay vector aligned). Returns the block width.
inline size_t column_block_width(size_t rows, size_t cols, int threads) {
    const size_t want_tasks = 4 * size_t(threads > 0 ? threads : 1);
    if (rows >= want_tasks || cols <= 256) return cols;
    size_t blocks = std::min((want_tasks + rows - 1) / rows, (cols + 255) / 256);
    size_t width = (cols + blocks - 1) / blocks;
    width = (width + 15) / 16 * 16;
    return std::max<size_t>(width, 16);
}

// Chunk size for schedule(dynamic): about 32 chunks per thread, so that uneven (power-law)
// tasks still balance while the shared counter is not hit once per tiny task.
inline size_t dynamic_chunk(size_t tasks, int threads) {
    return std::max<size_t>(1, tasks / (32 * size_t(threads > 0 ? threads : 1)));
}

[[noreturn]] inline void internal_error(const std::string& what) {
    throw Error(ErrorCategory::kInternal, what);
}

inline void check(bool ok, const char* op, const char* what) {
    if (!ok) internal_error(std::string(op) + ": " + what);
}

// z[0..n) += c0*w0 + c1*w1 + c2*w2 + c3*w3 (one pass over z for four source rows).
template <class T>
inline void axpy4(T* __restrict z, const T* __restrict w0, const T* __restrict w1,
                  const T* __restrict w2, const T* __restrict w3, T c0, T c1, T c2, T c3,
                  size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) z[i] += c0 * w0[i] + c1 * w1[i] + c2 * w2[i] + c3 * w3[i];
}

template <class T>
inline void axpy1(T* __restrict z, const T* __restrict w0, T c0, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) z[i] += c0 * w0[i];
}

// Calls f(std::integral_constant<Activation, A>{}) for the runtime act, so the formulas see a
// compile-time constant and their switch folds away inside the inner loops.
template <class F>
inline void dispatch_activation(Activation act, F&& f) {
    using A = Activation;
    switch (act) {
        case A::kSigmoid:
            f(std::integral_constant<A, A::kSigmoid>{});
            return;
        case A::kTanh:
            f(std::integral_constant<A, A::kTanh>{});
            return;
        case A::kRectifiedLinear:
            f(std::integral_constant<A, A::kRectifiedLinear>{});
            return;
        case A::kLinear:
            f(std::integral_constant<A, A::kLinear>{});
            return;
        case A::kSoftMax:
            f(std::integral_constant<A, A::kSoftMax>{});
            return;
        case A::kLeakyRectifiedLinear:
            f(std::integral_constant<A, A::kLeakyRectifiedLinear>{});
            return;
        case A::kExponentialLinear:
            f(std::integral_constant<A, A::kExponentialLinear>{});
            return;
        case A::kScaledExponentialLinear:
            f(std::integral_constant<A, A::kScaledExponentialLinear>{});
            return;
        case A::kSoftPlus:
            f(std::integral_constant<A, A::kSoftPlus>{});
            return;
        case A::kSoftSign:
            f(std::integral_constant<A, A::kSoftSign>{});
            return;
    }
    internal_error("unknown activation");
}

template <class F>
inline void dispatch_loss(ErrorFunction kind, F&& f) {
    using E = ErrorFunction;
    switch (kind) {
        case E::kL2:
            f(std::integral_constant<E, E::kL2>{});
            return;
        case E::kCrossEntropy:
            f(std::integral_constant<E, E::kCrossEntropy>{});
            return;
        case E::kScaledMarginalCrossEntropy:
            f(std::integral_constant<E, E::kScaledMarginalCrossEntropy>{});
            return;
        case E::kL1:
            f(std::integral_constant<E, E::kL1>{});
            return;
        case E::kL2Hinge:
            f(std::integral_constant<E, E::kL2Hinge>{});
            return;
        case E::kHinge:
            f(std::integral_constant<E, E::kHinge>{});
            return;
        case E::kDataScaledMarginalCrossEntropy:
            f(std::integral_constant<E, E::kDataScaledMarginalCrossEntropy>{});
            return;
    }
    internal_error("unknown error function");
}

}  // namespace sparsenet::cpu

#include "backend/cpu/cpu_ops_dense.h"
#include "backend/cpu/cpu_ops_sparse.h"
