#include "engine/input_norm.h"

#include <cmath>

#include "sparsenet/error.h"

namespace sparsenet::engine {

std::vector<double> row_square_sums(const Dataset& data) {
    if (data.is_indexed()) {
        throw Error(ErrorCategory::kInternal, "row_square_sums of an indexed dataset");
    }
    std::vector<double> squares(data.rows, 0.0);
    for (uint64_t r = 0; r < data.rows; ++r) {
        if (data.is_boolean()) {
            squares[r] = double(data.row_length(r));
            continue;
        }
        double s = 0.0;
        for (uint64_t e = data.offsets[r]; e < data.offsets[r + 1]; ++e) {
            s += double(data.values[e]) * double(data.values[e]);
        }
        squares[r] = s;
    }
    return squares;
}

void normalize_rows(Dataset& data, const std::vector<double>& squares, float scale) {
    if (data.is_indexed() || squares.size() != data.rows) {
        throw Error(ErrorCategory::kInternal, "normalize_rows: one square sum per stored row");
    }
    if (data.is_boolean()) data.values.assign(data.nnz(), 1.0f);
    for (uint64_t r = 0; r < data.rows; ++r) {
        if (!(squares[r] > 0.0)) continue;
        const double f = double(scale) / std::sqrt(squares[r]);
        for (uint64_t e = data.offsets[r]; e < data.offsets[r + 1]; ++e) {
            data.values[e] = static_cast<float>(double(data.values[e]) * f);
        }
    }
}

}  // namespace sparsenet::engine
