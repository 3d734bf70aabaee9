// Helpers shared by the backend op tests: batches over a dataset (contiguous with a first_row
// offset, or a row permutation), CSR views of them, and padded dense matrices (ld > cols).
// The CPU backend works on host memory, so the tests hand it std::vector storage directly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "sparsenet/dataset.h"
#include "support/test_support.h"

namespace sparsenet::testing {

inline const char* shape_name(RowShape s) {
    switch (s) {
        case RowShape::kEmptyRows:
            return "empty-rows";
        case RowShape::kOneNonzero:
            return "one-nonzero";
        case RowShape::kPowerLaw:
            return "power-law";
        case RowShape::kUniform:
            return "uniform";
    }
    return "?";
}

constexpr RowShape kAllShapes[] = {RowShape::kEmptyRows, RowShape::kOneNonzero, RowShape::kPowerLaw,
                                   RowShape::kUniform};

// The examples of one batch: dataset rows first_row + b, or rows[b] when permuted.
struct TestBatch {
    std::vector<uint32_t> rows;
    uint64_t first_row = 0;
    size_t size = 0;

    uint64_t example(size_t b) const { return rows.empty() ? first_row + b : rows[b]; }
    BatchRows view() const {
        BatchRows r;
        r.rows = rows.empty() ? nullptr : rows.data();
        r.first_row = first_row;
        r.batch = size;
        return r;
    }
};

// A batch of `size` rows of a dataset with `dataset_rows` rows (>= size): either the last
// `size` rows (first_row offset > 0 when the dataset is larger) or a random permutation.
inline TestBatch make_batch(uint64_t dataset_rows, size_t size, bool permuted, uint64_t seed) {
    TestBatch b;
    b.size = size;
    if (permuted) {
        std::vector<uint32_t> all(dataset_rows);
        std::iota(all.begin(), all.end(), 0u);
        std::mt19937_64 rng(seed);
        std::shuffle(all.begin(), all.end(), rng);
        b.rows.assign(all.begin(), all.begin() + size);
    } else {
        b.first_row = dataset_rows - size;
    }
    return b;
}

inline CsrBatchView csr_view(const Dataset& d, const TestBatch& b, uint32_t col_offset = 0) {
    CsrBatchView v;
    v.offsets = d.offsets.data();
    v.indices = d.indices.data();
    v.values = d.values.empty() ? nullptr : d.values.data();
    v.batch = b.view();
    v.cols = d.cols;
    v.col_offset = col_offset;
    return v;
}

// The same batch for the double ops (values converted to double into `values_d`).
inline cpu::CsrT<double> csr_view_d(const Dataset& d, const TestBatch& b,
                                    std::vector<double>& values_d, uint32_t col_offset = 0) {
    values_d.assign(d.values.begin(), d.values.end());
    cpu::CsrT<double> v;
    v.offsets = d.offsets.data();
    v.indices = d.indices.data();
    v.values = d.values.empty() ? nullptr : values_d.data();
    v.rows = b.rows.empty() ? nullptr : b.rows.data();
    v.first_row = b.first_row;
    v.batch = b.size;
    v.cols = d.cols;
    v.col_offset = col_offset;
    return v;
}

inline double entry_value(const Dataset& d, uint64_t e) {
    return d.values.empty() ? 1.0 : double(d.values[e]);
}

// A dense row-major matrix with padding (ld >= cols); padding holds a sentinel so tests can
// check that ops leave it alone.
template <class T>
struct Dense {
    std::vector<T> data;
    size_t rows = 0, cols = 0, ld = 0;

    Dense() = default;
    Dense(size_t r, size_t c, size_t pad = 0, T fill = T(0))
        : data(r * (c + pad) + 1, fill), rows(r), cols(c), ld(c + pad) {}
    T& at(size_t r, size_t c) { return data[r * ld + c]; }
    const T& at(size_t r, size_t c) const { return data[r * ld + c]; }
    MatrixView view() {
        static_assert(std::is_same_v<T, float>);
        return MatrixView{data.data(), rows, cols, ld};
    }
    ConstMatrixView cview() const {
        static_assert(std::is_same_v<T, float>);
        return ConstMatrixView(data.data(), rows, cols, ld);
    }
    cpu::MatT<T> mat() { return {data.data(), rows, cols, ld}; }
    cpu::CMatT<T> cmat() const { return {data.data(), rows, cols, ld}; }
};

template <class T>
inline Dense<T> random_dense(size_t rows, size_t cols, size_t pad, uint64_t seed, double lo = -1.0,
                             double hi = 1.0, T pad_fill = T(0)) {
    Dense<T> m(rows, cols, pad, pad_fill);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) m.at(r, c) = T(u(rng));
    return m;
}

// |got - want| <= rel * scale + abs, where scale bounds the magnitude of the summed terms.
// The reference of c[r, j] after gemm(ta, tb, alpha, a, b, beta, c0), in double, and the sum of
// the magnitudes of its terms (the scale `near` compares against).
struct GemmReference {
    double value = 0.0;
    double magnitude = 0.0;
};
inline GemmReference gemm_reference(bool ta, bool tb, float alpha, const Dense<float>& a,
                                    const Dense<float>& b, float beta, const Dense<float>& c0,
                                    size_t k, size_t r, size_t j) {
    GemmReference g;
    for (size_t q = 0; q < k; ++q) {
        const double t =
            double(ta ? a.at(q, r) : a.at(r, q)) * double(tb ? b.at(j, q) : b.at(q, j));
        g.value += t;
        g.magnitude += std::fabs(t);
    }
    g.value *= alpha;
    g.magnitude *= alpha;
    if (beta != 0.0f) {
        g.value += beta * double(c0.at(r, j));
        g.magnitude += std::fabs(beta * double(c0.at(r, j)));
    }
    return g;
}

inline bool near(double got, double want, double scale, double rel = 1e-5, double abs = 1e-6) {
    if (std::isnan(want)) return std::isnan(got);
    return std::fabs(got - want) <= rel * scale + abs;
}

inline std::string case_name(RowShape shape, bool valued, size_t batch, size_t width,
                             bool permuted) {
    return std::string(shape_name(shape)) + (valued ? " valued" : " boolean") +
           " batch=" + std::to_string(batch) + " width=" + std::to_string(width) +
           (permuted ? " permuted" : " offset");
}

}  // namespace sparsenet::testing
