// Dataset::validate: the CSR invariants documented in sparsenet/dataset.h.
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
}

}  // namespace sparsenet
