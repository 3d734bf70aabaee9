// Dataset::validate (the invariants documented in sparsenet/dataset.h), Dataset::expanded and
// column_band.
#include <algorithm>
#include <cmath>
#include <string>

#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet {

void Dataset::validate(const std::string& context) const {
    const std::string where = context + ": dataset " + name + ": ";
    auto fail = [&](const std::string& what) { throw Error(ErrorCategory::kData, where + what); };

    if (offsets.size() != rows + 1) {
        fail("offsets has " + std::to_string(offsets.size()) +
             " entries; expected rows + 1 = " + std::to_string(rows + 1));
    }
    if (offsets[0] != 0) fail("offsets[0] is " + std::to_string(offsets[0]) + "; expected 0");
    if (offsets.back() != indices.size()) {
        fail("offsets[rows] is " + std::to_string(offsets.back()) +
             "; expected the number of indices, " + std::to_string(indices.size()));
    }
    if (!values.empty() && values.size() != indices.size()) {
        fail("values has " + std::to_string(values.size()) + " entries; expected 0 (boolean) or " +
             std::to_string(indices.size()) + " (one per index)");
    }
    for (uint64_t r = 0; r < rows; ++r) {
        const uint64_t begin = offsets[r];
        const uint64_t end = offsets[r + 1];
        auto row_fail = [&](const std::string& what) {
            fail("row " + std::to_string(r) + ": " + what);
        };
        if (end < begin) {
            row_fail("offsets decrease (" + std::to_string(begin) + " then " + std::to_string(end) +
                     ")");
        }
        if (end > indices.size()) {
            row_fail("offset " + std::to_string(end) + " is beyond the " +
                     std::to_string(indices.size()) + " indices");
        }
        for (uint64_t k = begin; k < end; ++k) {
            const uint32_t c = indices[k];
            if (c >= cols) {
                row_fail("column index " + std::to_string(c) + " >= cols " + std::to_string(cols));
            }
            if (k > begin && c <= indices[k - 1]) {
                row_fail((c == indices[k - 1]
                              ? "duplicate column " + std::to_string(c)
                              : "column indices not increasing (" + std::to_string(indices[k - 1]) +
                                    " then " + std::to_string(c) + ")"));
            }
        }
    }
    if (!weights.empty() && weights.size() != examples()) {
        fail("weights has " + std::to_string(weights.size()) +
             " entries; expected 0 (unweighted) or " + std::to_string(examples()) +
             " (one per example)");
    }
    for (size_t e = 0; e < weights.size(); ++e) {
        if (!std::isfinite(weights[e])) {
            fail("example " + std::to_string(e) + ": weight " + std::to_string(weights[e]) +
                 " is not finite");
        }
    }
    for (size_t e = 0; e < example_rows.size(); ++e) {
        if (example_rows[e] >= rows) {
            fail("example " + std::to_string(e) + ": example_rows entry " +
                 std::to_string(example_rows[e]) + " >= rows " + std::to_string(rows));
        }
    }
    if (dense && sparse_ignore_zero) {
        fail(
            "sparse_ignore_zero is set on a dense dataset; expected it on sparse datasets only "
            "(SparseIgnoreZero ignores absent targets, and dense data has none)");
    }
}

Dataset Dataset::expanded() const {
    if (!is_indexed()) return *this;
    uint64_t total = 0;
    for (size_t e = 0; e < example_rows.size(); ++e) {
        if (example_rows[e] >= rows) {
            throw Error(ErrorCategory::kData, "dataset " + name + ": example " + std::to_string(e) +
                                                  ": example_rows entry " +
                                                  std::to_string(example_rows[e]) + " >= rows " +
                                                  std::to_string(rows));
        }
        total += row_length(example_rows[e]);
    }
    Dataset out;
    out.name = name;
    out.rows = example_rows.size();
    out.cols = cols;
    out.weights = weights;
    out.dense = dense;
    out.sparse_ignore_zero = sparse_ignore_zero;
    out.offsets.reserve(out.rows + 1);
    out.indices.reserve(total);
    if (!values.empty()) out.values.reserve(total);
    for (uint32_t r : example_rows) {
        out.indices.insert(out.indices.end(), indices.begin() + offsets[r],
                           indices.begin() + offsets[r + 1]);
        if (!values.empty()) {
            out.values.insert(out.values.end(), values.begin() + offsets[r],
                              values.begin() + offsets[r + 1]);
        }
        out.offsets.push_back(out.indices.size());
    }
    return out;
}

Dataset column_band(const Dataset& data, uint32_t first_col, uint32_t last_col) {
    if (first_col > last_col) {
        throw Error(ErrorCategory::kUsage, "column_band: dataset " + data.name + ": first column " +
                                               std::to_string(first_col) + " > last column " +
                                               std::to_string(last_col) +
                                               "; expected a band [first, last)");
    }
    const uint32_t last = std::min(last_col, data.cols);
    const uint32_t first = std::min(first_col, last);
    Dataset out;
    out.name = data.name;
    out.rows = data.rows;
    out.cols = last - first;
    out.weights = data.weights;
    out.example_rows = data.example_rows;
    out.dense = data.dense;
    out.sparse_ignore_zero = data.sparse_ignore_zero;
    out.offsets.assign(data.rows + 1, 0);
    for (uint64_t r = 0; r < data.rows; ++r) {
        // Sorted rows: the band is one run of each row.
        const auto row_end = data.indices.begin() + data.offsets[r + 1];
        const auto lo = std::lower_bound(data.indices.begin() + data.offsets[r], row_end, first);
        const auto hi = std::lower_bound(lo, row_end, last);
        for (auto it = lo; it != hi; ++it) out.indices.push_back(*it - first);
        if (!data.values.empty()) {
            out.values.insert(out.values.end(), data.values.begin() + (lo - data.indices.begin()),
                              data.values.begin() + (hi - data.indices.begin()));
        }
        out.offsets[r + 1] = out.indices.size();
    }
    return out;
}

}  // namespace sparsenet
