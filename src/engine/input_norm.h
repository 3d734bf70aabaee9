// Input layers with "Normalize" (LayerConfig::normalize_l2): each example row x of the layer's
// dataset becomes s * x / ||x||_2, computed once when the dataset is bound, so every backend op
// sees an ordinary valued dataset (docs/config-reference.md, $.Layers[].Normalize).
#pragma once

#include <vector>

#include "sparsenet/dataset.h"

namespace sparsenet::engine {

// Sum of the squared stored values of each row of `data` (1 per entry of boolean data), in
// double. `data` must not be indexed (callers pass Dataset::expanded()).
std::vector<double> row_square_sums(const Dataset& data);

// Scales row r of `data` (not indexed) to L2 norm `scale`, its norm being sqrt(squares[r]) (the
// whole row's, when `data` holds a column band of it); rows whose squares are 0 are left as they
// are. Boolean data becomes valued (one float per stored entry).
void normalize_rows(Dataset& data, const std::vector<double>& squares, float scale);

}  // namespace sparsenet::engine
