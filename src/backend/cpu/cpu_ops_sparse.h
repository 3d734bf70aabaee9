// Sparse CPU ops: the CSR forward product, the compact sparse weight gradient, the output delta
// with sparse targets, and top-k with sparse exclusions. Included by cpu_ops.h.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace sparsenet::cpu {

// Scale of the entries that survive the input noise: 1/(1-p), or 1 without noise.
template <class T>
inline T noise_scale(const SparseNoise& noise) {
    return noise.p > 0.0f ? T(1) / (T(1) - T(noise.p)) : T(1);
}

// ---- csr_matmul ----

// z[b, :] = beta * z[b, :] + sum over the kept stored entries (j, v) of row b of v * s * w[j, :]
// (beta == 0 overwrites). With noise.p > 0 an entry is kept iff keep_unit(seed, example, col_offset
// + j, p) and s = 1/(1-p); otherwise s = 1. Entries are summed in CSR order, four at a time.
// w_bf16 (nullable; w.data may then be null): the rows are read from this BF16 matrix (w's ld),
// each widened into a buffer before the same sums: bit for bit the product with the FP32 matrix
// of the BF16 values.
template <class T>
void csr_matmul(const CsrT<T>& x, SparseNoise noise, CMatT<T> w, MatT<T> z, T beta, int threads,
                const uint16_t* w_bf16 = nullptr) {
    const size_t rows = z.rows, n = z.cols;
    if (rows == 0 || n == 0) return;
    const bool noisy = noise.p > 0.0f;
    const T s = noise_scale<T>(noise);
    const size_t width = column_block_width(rows, n, threads);
    const size_t blocks = (n + width - 1) / width;
    const size_t tasks = rows * blocks;
    const bool par = tasks > 1 && parallel_worth(rows * n, threads);
    const size_t chunk = dynamic_chunk(tasks, threads);
#pragma omp parallel for num_threads(threads) schedule(dynamic, chunk) if (par)
    for (size_t task = 0; task < tasks; ++task) {
        const size_t b = task / blocks;
        const size_t c0 = (task % blocks) * width, nc = std::min(width, n - c0);
        const uint64_t ex = x.example(b);
        T* __restrict zr = z.row(b) + c0;
        if (beta == T(0)) {
            for (size_t j = 0; j < nc; ++j) zr[j] = T(0);
        } else if (beta != T(1)) {
            for (size_t j = 0; j < nc; ++j) zr[j] *= beta;
        }
        const T* src[4];
        T coef[4];
        int pending = 0;
        T* wide = nullptr;  // w_bf16: the pending rows, widened
        if (w_bf16 != nullptr) {
            thread_local std::vector<T> buffer;
            if (buffer.size() < 4 * nc) buffer.resize(4 * nc);
            wide = buffer.data();
        }
        for (uint64_t e = x.offsets[ex], end = x.offsets[ex + 1]; e < end; ++e) {
            const uint32_t col = x.indices[e];
            if (noisy &&
                !formulas::keep_unit(noise.seed, ex, uint64_t(x.col_offset) + col, noise.p))
                continue;
            if (wide != nullptr) {
                const uint16_t* __restrict from = w_bf16 + size_t(col) * w.ld + c0;
                T* __restrict to = wide + size_t(pending) * nc;
#pragma omp simd
                for (size_t j = 0; j < nc; ++j) to[j] = T(formulas::bf16_to_float(from[j]));
                src[pending] = to;
            } else {
                src[pending] = w.row(col) + c0;
            }
            coef[pending] = noisy ? x.value(e) * s : x.value(e);
            if (++pending == 4) {
                axpy4(zr, src[0], src[1], src[2], src[3], coef[0], coef[1], coef[2], coef[3], nc);
                pending = 0;
            }
        }
        for (int i = 0; i < pending; ++i) axpy1(zr, src[i], coef[i], nc);
    }
}

// ---- csr_weight_grad ----

// Compact gradient of W [in, out] from a sparse batch: grad.rows = the sorted, unique columns the
// batch stores (entries dropped by the noise do not count), grad.values[i, :] = alpha * sum over
// (b, entry of column rows[i]) of v * s * dz[b, :], summed in increasing b. A counting sort
// builds the transposed index in the scratch (reused across calls); the rows are then summed
// in parallel, each by one thread in a fixed order, so the result is independent of threads.
//
// csr_weight_index: the two passes that order the batch's kept entries by column (grad.rows,
// *grad.count and the scratch's starts, sorted_row, sorted_coef); returns the touched columns.
template <class T>
size_t csr_weight_index(const CsrT<T>& x, SparseNoise noise, size_t rows, T alpha,
                        const RowGradT<T>& grad, WeightGradScratch<T>& s) {
    const size_t in = x.cols;
    const bool noisy = noise.p > 0.0f;
    const T scale = noise_scale<T>(noise);

    uint64_t nnz = 0;
    for (size_t b = 0; b < rows; ++b) nnz += x.end(b) - x.begin(b);
    grow(s.col_count, in, 0u);
    grow(s.sorted_row, nnz);
    grow(s.sorted_coef, nnz);
    grow(s.unique, std::min<uint64_t>(nnz, in));
    if (noisy) grow(s.kept, nnz);
    uint32_t* count = s.col_count.data();
    uint32_t* unique = s.unique.data();
    uint8_t* kept = s.kept.data();
    auto reset_counts = [&](size_t touched) {
        for (size_t i = 0; i < touched; ++i) count[unique[i]] = 0;
    };

    // Pass 1: per-column counts of the kept entries and the touched columns (the noise mask
    // is drawn once and remembered for pass 2).
    size_t touched = 0;
    uint64_t q = 0;
    for (size_t b = 0; b < rows; ++b) {
        const uint64_t ex = x.example(b);
        for (uint64_t e = x.offsets[ex], end = x.offsets[ex + 1]; e < end; ++e, ++q) {
            const uint32_t col = x.indices[e];
            if (noisy) {
                kept[q] =
                    formulas::keep_unit(noise.seed, ex, uint64_t(x.col_offset) + col, noise.p);
                if (!kept[q]) continue;
            }
            if (col >= in) {
                reset_counts(touched);
                internal_error("csr_weight_grad: column id " + std::to_string(col) +
                               " >= input width " + std::to_string(in));
            }
            if (count[col]++ == 0) unique[touched++] = col;
        }
    }
    if (touched > grad.capacity) {
        reset_counts(touched);
        internal_error("csr_weight_grad: the batch touches " + std::to_string(touched) +
                       " rows but the gradient capacity is " + std::to_string(grad.capacity));
    }

    // Sorted touched columns: a scan of the counts when they are dense, else a sort.
    if (in <= 8 * touched) {
        size_t u = 0;
        for (size_t col = 0; col < in; ++col)
            if (count[col] != 0) unique[u++] = uint32_t(col);
    } else {
        std::sort(unique, unique + touched);
    }

    // Pass 2: counting sort by column (stable: the entries of a column stay in increasing b).
    grow(s.starts, touched + 1);
    uint64_t* starts = s.starts.data();
    starts[0] = 0;
    for (size_t i = 0; i < touched; ++i) {
        const uint32_t col = unique[i];
        starts[i + 1] = starts[i] + count[col];
        count[col] = uint32_t(starts[i]);  // now the next write position
        grad.rows[i] = col;
    }
    q = 0;
    for (size_t b = 0; b < rows; ++b) {
        const uint64_t ex = x.example(b);
        for (uint64_t e = x.offsets[ex], end = x.offsets[ex + 1]; e < end; ++e, ++q) {
            if (noisy && !kept[q]) continue;
            const uint32_t pos = count[x.indices[e]]++;
            s.sorted_row[pos] = uint32_t(b);
            s.sorted_coef[pos] = alpha * (noisy ? x.value(e) * scale : x.value(e));
        }
    }
    reset_counts(touched);
    *grad.count = uint32_t(touched);
    return touched;
}

// Row i of the compact gradient (touched column i of csr_weight_index), columns [c0, c0 + nc):
// the dz rows of its entries in increasing b, four at a time.
template <class T>
inline void sum_column_entries(const WeightGradScratch<T>& s, CMatT<T> dz, size_t i, size_t c0,
                               size_t nc, T* __restrict out) {
    const uint32_t* srow = s.sorted_row.data();
    const T* scoef = s.sorted_coef.data();
    for (size_t j = 0; j < nc; ++j) out[j] = T(0);
    uint64_t e = s.starts[i];
    const uint64_t end = s.starts[i + 1];
    for (; e + 4 <= end; e += 4) {
        axpy4(out, dz.row(srow[e]) + c0, dz.row(srow[e + 1]) + c0, dz.row(srow[e + 2]) + c0,
              dz.row(srow[e + 3]) + c0, scoef[e], scoef[e + 1], scoef[e + 2], scoef[e + 3], nc);
    }
    for (; e < end; ++e) axpy1(out, dz.row(srow[e]) + c0, scoef[e], nc);
}

template <class T>
void csr_weight_grad(const CsrT<T>& x, SparseNoise noise, CMatT<T> dz, T alpha,
                     const RowGradT<T>& grad, WeightGradScratch<T>& s, int threads) {
    const size_t n = dz.cols;
    const size_t touched = csr_weight_index(x, noise, dz.rows, alpha, grad, s);
    if (touched == 0 || n == 0) return;
    const uint64_t nnz = s.starts[touched];  // kept entries

    // Sum the dz rows of each touched column.
    const size_t width = column_block_width(touched, n, threads);
    const size_t blocks = (n + width - 1) / width;
    const size_t tasks = touched * blocks;
    const bool par = tasks > 1 && parallel_worth(nnz * n, threads);
    const size_t chunk = dynamic_chunk(tasks, threads);
#pragma omp parallel for num_threads(threads) schedule(dynamic, chunk) if (par)
    for (size_t task = 0; task < tasks; ++task) {
        const size_t i = task / blocks;
        const size_t c0 = (task % blocks) * width, nc = std::min(width, n - c0);
        sum_column_entries(s, dz, i, c0, nc, grad.values + i * n + c0);
    }
}

// ---- sparse_step ----

// csr_weight_grad then optimizer_step_rows (touched rows only: lazy, a zero-gradient no-op, or a
// row clock), fused: each touched row's gradient is summed into a per-thread row (the same
// expressions, so the same bits as grad.values) and applied at once; grad.values is not written.
template <class T>
void sparse_step(const CsrT<T>& x, SparseNoise noise, CMatT<T> dz, T alpha,
                 const formulas::OptimizerStep& step, MatT<T> w, const RowGradT<T>& grad, T* state1,
                 T* state2, RowClock clock, WeightGradScratch<T>& s, int threads) {
    const size_t n = dz.cols;
    const size_t touched = csr_weight_index(x, noise, dz.rows, alpha, grad, s);
    if (touched == 0 || n == 0) return;
    for (size_t i = 0; i < touched; ++i)
        check(grad.rows[i] < w.rows, "sparse_step", "gradient row id out of range");
    if (clock.last != nullptr) {
        for (size_t i = 0; i < touched; ++i)
            check(clock.last[grad.rows[i]] < clock.now, "sparse_step",
                  "a row clock is ahead of the step");
    }
    const bool par = touched > 1 && parallel_worth(size_t(s.starts[touched]) * n, threads);
    grow(s.step_rows, size_t(std::max(threads, 1)) * n);  // before the region: it may throw
    T* rows_of_threads = s.step_rows.data();
    dispatch_optimizer(step.kind, [&](auto k_const) {
        constexpr OptimizerKind K = decltype(k_const)::value;
#pragma omp parallel num_threads(threads) if (par)
        {
            T* row = rows_of_threads + size_t(omp_get_thread_num()) * n;
#pragma omp for schedule(dynamic, 16)
            for (size_t i = 0; i < touched; ++i) {
                sum_column_entries(s, dz, i, 0, n, row);
                const uint32_t r = grad.rows[i];
                const size_t off = size_t(r) * w.ld;
                if (clock.last != nullptr) {
                    const uint32_t skipped = clock.now - 1 - clock.last[r];
                    if (skipped > 0) {
                        const formulas::CatchUp c = formulas::catch_up_coefficients(step, skipped);
                        for (size_t j = 0; j < n; ++j)
                            formulas::catch_up_element(c, w.data[off + j], state1[off + j]);
                    }
                    clock.last[r] = clock.now;
                }
                optimizer_row<K>(step, w.data + off, row, state1 ? state1 + off : nullptr,
                                 state2 ? state2 + off : nullptr, n);
            }
        }
    });
}

// ---- scatter_rows ----

// dense := beta * dense + G with G = grad.values at rows grad.rows, zero elsewhere (beta == 0
// overwrites every row of dense). The row ids are unique, so each dense row is written by one
// thread: bit-identical for any thread count. Cost O(rows * cols) when beta != 1, else
// O(count * cols).
template <class T>
void scatter_rows(const RowGradT<T>& grad, T beta, MatT<T> dense, int threads) {
    const size_t rows = dense.rows, n = dense.cols;
    const size_t count = *grad.count;
    check(count <= grad.capacity, "scatter_rows", "row count exceeds the capacity");
    for (size_t i = 0; i < count; ++i)
        check(grad.rows[i] < rows, "scatter_rows", "gradient row id out of range");
    if (rows == 0 || n == 0) return;
    if (beta != T(1)) {
        const bool par = parallel_worth(rows * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t r = 0; r < rows; ++r) {
            T* __restrict dr = dense.row(r);
            if (beta == T(0)) {
#pragma omp simd
                for (size_t j = 0; j < n; ++j) dr[j] = T(0);
            } else {
#pragma omp simd
                for (size_t j = 0; j < n; ++j) dr[j] *= beta;
            }
        }
    }
    const bool par = parallel_worth(count * n, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t i = 0; i < count; ++i) {
        T* __restrict dr = dense.row(grad.rows[i]);
        const T* __restrict g = grad.values + i * n;
#pragma omp simd
        for (size_t j = 0; j < n; ++j) dr[j] += g[j];
    }
}

// ---- output_delta ----

// sum_j loss_element(p, a[j], 0) over a row of n activations in [0, 1], for a logarithmic loss
// (formulas::zero_loss_is_log): the row's four quarters multiplied element by element, one
// logarithm per product of four factors (each factor >= log_floor = 1e-7, so a product stays
// above 1e-28, a normal float), summed in double. A quarter of loss_element's logarithms; the
// sum differs from theirs by about 1e-7 relative (float roundings either way).
// Why: summing loss_element's logarithms took half of output_delta's time at dsstne-bench's
// shape (`sparsenet_bench_ops`: BM_OutputDeltaSmce against BM_OutputDeltaSmceNoLoss). Tried
// (Xeon with AMX, one thread, 256 x 27278): these quarters 3.2-3.5 ms against 6.7-7.7 for
// loss_element's loop; consecutive groups of four 4.8-5.1; double products of 16 (one double
// logarithm per 16 factors) 12.5-12.9, and of 32 in 16 lanes 14 (GCC keeps the lanes in memory).
template <class T>
inline double zero_target_log_loss(const formulas::LossParams& p, const T* a, size_t n) {
    using formulas::zero_log_factor;
    const size_t q = n / 4;
    double logs = 0.0;
#pragma omp simd reduction(+ : logs)
    for (size_t j = 0; j < q; ++j) {
        logs += double(formulas::sn_log(zero_log_factor(p, a[j]) * zero_log_factor(p, a[j + q]) *
                                        zero_log_factor(p, a[j + 2 * q]) *
                                        zero_log_factor(p, a[j + 3 * q])));
    }
    for (size_t j = 4 * q; j < n; ++j) logs += double(formulas::sn_log(zero_log_factor(p, a[j])));
    return -double(formulas::zero_log_scale(p)) * logs;
}

// One row of output_delta with the activation and loss kind fixed at compile time. Returns the
// row's loss when want_loss: the zero-target pass plus corrections at the stored targets, or,
// with ignore_zero, the stored targets only.
//
// d may be a (the delta written over the activations, Network::Impl::delta_over_activation):
// every read of a row's activations happens before the write of the delta at that element. The
// loss and SoftMax's row statistics (sum(t), dot) are taken first, reading a only; then one pass
// writes every element, the zero-target delta over the runs between stored targets (element-wise)
// and the stored target's delta at its column, each from its own a[j]. The values and the loss
// are those of the two-buffer order bit for bit (the same formulas, the same summation order).
template <class T, Activation A, ErrorFunction K, bool Multinomial>
inline double output_delta_row(const formulas::LossParams& params,
                               const formulas::ActivationParams& act_params, const T* a,
                               const CsrT<T>& target, size_t b, T scale, T* d, size_t n,
                               bool want_loss) {
    formulas::LossParams p = params;
    p.kind = K;
    p.multinomial = Multinomial;  // a constant, so the loss loops vectorise without unswitching
    formulas::ActivationParams act = act_params;
    act.kind = A;
    const bool ignore_zero = params.ignore_zero;
    const uint64_t ex = target.example(b);
    const uint64_t t0 = target.offsets[ex], t1 = target.offsets[ex + 1];
    const uint32_t* idx = target.indices;
    double loss = 0.0;
    // Writes dense(j) at every column of [0, n) but the stored ones and stored(e, j) at each
    // stored column j = idx[e] (strictly increasing: output_delta checked), in column order.
    const auto write_row = [&](auto dense, auto stored) {
        size_t j0 = 0;
        for (uint64_t e = t0; e < t1; ++e) {
            const size_t j = std::min<size_t>(idx[e], n);
#pragma omp simd
            for (size_t k = j0; k < j; ++k) d[k] = dense(k);
            if (j == n) break;
            d[j] = stored(e, j);
            j0 = j + 1;
        }
#pragma omp simd
        for (size_t k = j0; k < n; ++k) d[k] = dense(k);
    };

    if constexpr (A == Activation::kSoftMax) {
        if constexpr (K == ErrorFunction::kCrossEntropy && Multinomial) {
            // delta = a * sum(t) - t. The zero-target loss -0 * log(a) is 0: only stored
            // entries contribute (so ignore_zero changes nothing here). sum(t) is the whole
            // row's (target.row_totals) when the targets are a column band of it.
            T ts;
            if (target.row_totals != nullptr) {
                ts = target.row_totals[ex];
            } else {
                double tsum = 0.0;
                for (uint64_t e = t0; e < t1; ++e) tsum += double(target.value(e));
                ts = T(tsum);
            }
            if (want_loss) {
                for (uint64_t e = t0; e < t1; ++e)
                    loss += double(formulas::loss_element(p, a[idx[e]], target.value(e)));
            }
            write_row(
                [&](size_t j) {
                    return scale * formulas::multinomial_delta_element(a[j], T(0), ts);
                },
                [&](uint64_t e, size_t j) {
                    return scale * formulas::multinomial_delta_element(a[j], target.value(e), ts);
                });
            return loss;
        }
    }
    if (want_loss) {
        // On activations in [0, 1] every factor is in [log_floor, 1], so a product of four
        // can neither underflow nor overflow; other activations keep loss_element's loop.
        constexpr bool kUnitRange = A == Activation::kSigmoid || A == Activation::kSoftMax;
        if (!ignore_zero && kUnitRange && formulas::zero_loss_is_log(p)) {
            loss += zero_target_log_loss(p, a, n);
        } else if (!ignore_zero) {
#pragma omp simd reduction(+ : loss)
            for (size_t j = 0; j < n; ++j) loss += double(formulas::loss_element(p, a[j], T(0)));
        }
        for (uint64_t e = t0; e < t1; ++e) {
            const uint32_t j = idx[e];
            loss += double(formulas::loss_element(p, a[j], target.value(e)));
            if (!ignore_zero) loss -= double(formulas::loss_element(p, a[j], T(0)));
        }
    }
    if constexpr (A == Activation::kSoftMax) {
        // General SoftMax: delta_k = a_k (g_k - sum_j g_j a_j) with g = dL/da (g = 0 at absent
        // targets with ignore_zero).
        double dot = 0.0;
        if (!ignore_zero) {
#pragma omp simd reduction(+ : dot)
            for (size_t j = 0; j < n; ++j)
                dot += double(formulas::loss_grad_element(p, a[j], T(0)) * a[j]);
        }
        for (uint64_t e = t0; e < t1; ++e) {
            const uint32_t j = idx[e];
            const T t = target.value(e);
            dot += double(formulas::loss_grad_element(p, a[j], t) * a[j]);
            if (!ignore_zero) dot -= double(formulas::loss_grad_element(p, a[j], T(0)) * a[j]);
        }
        const T dt = T(dot);
        const auto stored = [&](uint64_t e, size_t j) {
            return scale * formulas::softmax_delta_element(
                               a[j], formulas::loss_grad_element(p, a[j], target.value(e)), dt);
        };
        if (ignore_zero) {
            write_row(
                [&](size_t j) { return scale * formulas::softmax_delta_element(a[j], T(0), dt); },
                stored);
        } else {
            write_row(
                [&](size_t j) {
                    return scale * formulas::softmax_delta_element(
                                       a[j], formulas::loss_grad_element(p, a[j], T(0)), dt);
                },
                stored);
        }
    } else {
        // DeltaBoost scales the delta of zero and nonzero targets (1 and 1 by default).
        const T scale_zero = scale * T(params.boost_zero);
        const T scale_one = scale * T(params.boost_one);
        const auto stored = [&](uint64_t e, size_t j) {
            const T t = target.value(e);
            return (t != T(0) ? scale_one : scale_zero) *
                   formulas::output_delta_element(p, act, a[j], t);
        };
        if (ignore_zero) {
            write_row([](size_t) { return T(0); }, stored);
        } else {
            write_row(
                [&](size_t j) {
                    return scale_zero * formulas::output_delta_element(p, act, a[j], T(0));
                },
                stored);
        }
    }
    return loss;
}

// delta := scale * w_b * dL/dz for an output layer with activation act and sparse targets (a
// dense zero-target pass plus a correction at the stored entries; targets are never densified;
// with loss.ignore_zero only the stored entries), w_b = target.weight(b). If loss_sum is not
// null, *loss_sum += the unscaled batch loss, each row's loss times w_b, summed per row in double
// and then over rows in row order (row_loss is the caller's scratch).
//
// activate_z (output_epilogue): z with the storage of a; each row first becomes f(z + bias)
// (bias_activation_row, bias may be null), then its delta is computed while the row is in cache.
// row_norms (may be null): each row's sqrt(sum of a^2) in double, before its delta is written
// (the finite-value guard's check of the activations, Backend::output_delta).
// delta_bf16 (may be null): each row's BF16 copy of its delta (delta's layout), as it is written.
template <class T>
void output_delta(const formulas::LossParams& loss, const formulas::ActivationParams& act,
                  CMatT<T> a, const CsrT<T>& target, T scale, MatT<T> delta, double* loss_sum,
                  std::vector<double>& row_loss, int threads, T* activate_z = nullptr,
                  const T* bias = nullptr, float* row_norms = nullptr,
                  uint16_t* delta_bf16 = nullptr) {
    const size_t rows = a.rows, n = a.cols;
    if (rows == 0) return;
    // The correction at each stored target overwrites delta[j] and adds j's loss: a row holding
    // column j twice would keep the last entry's delta and count the loss twice (and race on the
    // GPU). Target rows must hold strictly increasing column ids; nothing is written otherwise.
    // O(stored targets), before the parallel region (which cannot throw).
    for (size_t b = 0; b < rows; ++b) {
        const uint64_t ex = target.example(b);
        for (uint64_t e = target.offsets[ex] + 1; e < target.offsets[ex + 1]; ++e) {
            if (target.indices[e] <= target.indices[e - 1]) {
                internal_error("output_delta: target row " + std::to_string(ex) + ": column " +
                               std::to_string(target.indices[e]) +
                               " repeated or out of order (target rows must hold strictly "
                               "increasing column ids)");
            }
        }
    }
    const bool want_loss = loss_sum != nullptr;
    grow(row_loss, rows);
    double* rl = row_loss.data();
    const bool par = parallel_worth(rows * n, threads);
    dispatch_activation(act.kind, [&](auto a_const) {
        dispatch_loss(loss.kind, [&](auto k_const) {
            constexpr Activation A = decltype(a_const)::value;
            constexpr ErrorFunction K = decltype(k_const)::value;
            auto run = [&](auto m_const) {
                constexpr bool M = decltype(m_const)::value;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
                for (size_t b = 0; b < rows; ++b) {
                    if (activate_z != nullptr) {
                        formulas::ActivationParams p = act;  // private, kind constant
                        p.kind = A;
                        bias_activation_row<A>(p, bias, activate_z + b * a.ld, n);
                    }
                    if (row_norms != nullptr) {
                        const T* ar = a.row(b);
                        double sq = 0.0;
#pragma omp simd reduction(+ : sq)
                        for (size_t j = 0; j < n; ++j) sq += double(ar[j]) * double(ar[j]);
                        row_norms[b] = float(std::sqrt(sq));
                    }
                    // The example's weight scales its delta and its loss (1 when unweighted, so
                    // unweighted results are unchanged bit for bit).
                    const T wb = target.weight(b);
                    rl[b] = double(wb) * output_delta_row<T, A, K, M>(loss, act, a.row(b), target,
                                                                      b, scale * wb, delta.row(b),
                                                                      n, want_loss);
                    if (delta_bf16 != nullptr)
                        write_bf16(delta.row(b), delta_bf16 + b * delta.ld, n);
                }
            };
            if constexpr (K == ErrorFunction::kCrossEntropy) {
                if (loss.multinomial) {
                    run(std::true_type{});
                    return;
                }
            }
            run(std::false_type{});
        });
    });
    if (want_loss) {
        double total = 0.0;
        for (size_t b = 0; b < rows; ++b) total += rl[b];
        *loss_sum += total;
    }
}

// ---- top_k ----

// x ranks before y: higher score, ties broken by the lower column.
template <class T>
inline bool ranks_before(const ScoreIndex<T>& x, const ScoreIndex<T>& y) {
    return x.score > y.score || (x.score == y.score && x.index < y.index);
}

// Bit j set iff v[j] > threshold, for the 32 scores at v (NaN compares false).
template <class T>
inline uint32_t above_threshold_mask(const T* v, T threshold) {
    uint32_t mask = 0;
#pragma omp simd reduction(| : mask)
    for (uint32_t j = 0; j < 32; ++j) mask |= (v[j] > threshold ? 1u : 0u) << j;
    return mask;
}

// top_k's activation (Backend::top_k): params == nullptr ranks the scores as they are.
template <class T>
struct RowActivation {
    const formulas::ActivationParams* params = nullptr;
    const T* bias = nullptr;
};

// Per row: the k best (score, column) pairs in descending order (ties: lower column first),
// skipping the columns stored in that row of `exclude` and NaN scores. Slots beyond the
// available columns get score -inf and index UINT32_MAX. out_*: [rows, k].
//
// With act.params: each row is first copied into this thread's part of `rows` and activated
// there by bias_activation_row, the function bias_activation_forward runs on each row (the same
// bits), and that copy is ranked: the scores are read from memory once and the activations never
// written back (bias_activation_forward then top_k read the [rows, n] scores twice and wrote them
// once; a 27,278-wide row is 109 KB, which stays in this core's L2 between the two steps).
//
// Per row, candidates are appended to a buffer of 2 min(k, n) + 64 pairs; when it fills, an
// nth_element keeps the best min(k, n) and the worst of those becomes the threshold. Columns
// are scanned in increasing order, so a later column must beat the threshold strictly, and
// blocks of 32 scores with none above it (NaN never is) are skipped with one vector compare.
// Expected cost O(n + k log(n/k)) per row, plus a final sort of k pairs.
template <class T>
void top_k(CMatT<T> scores, const CsrT<T>* exclude, size_t k, T* out_scores, uint32_t* out_indices,
           std::vector<ScoreIndex<T>>& scratch, int threads, RowActivation<T> act = {},
           std::vector<T>* rows_scratch = nullptr) {
    const size_t rows = scores.rows, n = scores.cols;
    if (rows == 0 || k == 0) return;
    const size_t kk = std::min(k, n);
    const size_t cap = 2 * kk + 64;
    const int team = std::max(threads, 1);
    grow(scratch, cap * size_t(team));
    // Each thread's activated row: a multiple of 16 elements apart (64 bytes for float).
    const size_t row_stride = (n + 15) / 16 * 16;
    std::vector<T> local_rows;
    std::vector<T>& act_rows = rows_scratch != nullptr ? *rows_scratch : local_rows;
    if (act.params != nullptr) grow(act_rows, row_stride * size_t(team));
    const bool par = parallel_worth(rows * n, threads);
    const auto better = [](const ScoreIndex<T>& x, const ScoreIndex<T>& y) {
        return ranks_before(x, y);
    };
#pragma omp parallel num_threads(team) if (par)
    {
        ScoreIndex<T>* buf = scratch.data() + size_t(omp_get_thread_num()) * cap;
        T* activated = act.params != nullptr
                           ? act_rows.data() + size_t(omp_get_thread_num()) * row_stride
                           : nullptr;
#pragma omp for schedule(dynamic, 4)
        for (size_t b = 0; b < rows; ++b) {
            const T* sr = scores.row(b);
            if (activated != nullptr) {
                std::copy(sr, sr + n, activated);
                dispatch_activation(act.params->kind, [&](auto a_const) {
                    constexpr Activation A = decltype(a_const)::value;
                    formulas::ActivationParams p = *act.params;  // private, as in
                    p.kind = A;                                  // bias_activation_forward
                    bias_activation_row<A>(p, act.bias, activated, n);
                });
                sr = activated;
            }
            const uint32_t* xi = nullptr;
            uint64_t xe = 0, xend = 0;
            if (exclude != nullptr) {
                xi = exclude->indices;
                xe = exclude->begin(b);
                xend = exclude->end(b);
            }
            auto excluded = [&](size_t c) {
                while (xe < xend && xi[xe] < c) ++xe;
                return xe < xend && xi[xe] == c;
            };
            size_t size = 0;
            bool has_threshold = false;
            T threshold = T(0);
            auto offer = [&](size_t j, T v) {
                if (excluded(j)) return;
                buf[size++] = ScoreIndex<T>{v, uint32_t(j)};
                if (size == cap) {
                    std::nth_element(buf, buf + (kk - 1), buf + size, better);
                    size = kk;
                    threshold = buf[kk - 1].score;
                    has_threshold = true;
                }
            };
            size_t c = 0;
            for (; c < n && !has_threshold; ++c)
                if (!std::isnan(sr[c])) offer(c, sr[c]);
            constexpr size_t kBlock = 32;
            for (; c < n; c += kBlock) {
                const size_t cend = std::min(n, c + kBlock);
                if (cend - c < kBlock) {
                    for (size_t j = c; j < cend; ++j)
                        if (sr[j] > threshold) offer(j, sr[j]);
                    break;
                }
                // Visit only the set bits (the threshold may rise inside the block).
                for (uint32_t mask = above_threshold_mask(sr + c, threshold); mask != 0;
                     mask &= mask - 1) {
                    const size_t j = c + size_t(__builtin_ctz(mask));
                    if (sr[j] > threshold) offer(j, sr[j]);
                }
            }
            const size_t m = std::min(size, kk);
            if (m < size) std::nth_element(buf, buf + m, buf + size, better);
            std::sort(buf, buf + m, better);
            T* os = out_scores + b * k;
            uint32_t* oi = out_indices + b * k;
            for (size_t i = 0; i < m; ++i) {
                os[i] = buf[i].score;
                oi[i] = buf[i].index;
            }
            for (size_t i = m; i < k; ++i) {
                os[i] = -std::numeric_limits<T>::infinity();
                oi[i] = UINT32_MAX;
            }
        }
    }
}

}  // namespace sparsenet::cpu
