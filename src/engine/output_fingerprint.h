// The fingerprint of a dense output layer (an ANN index's proof that it belongs to its model): a
// 64-bit hash of the layer's shape, how it ranks, and the bits of its weights in row order and of
// its biases. Computed from the matrix in memory (output_fingerprint, ann_index.h) or block of rows
// by block of rows while a streamed load reads a matrix it does not keep (Network::load with
// LoadOptions::release_output): the same value either way, so an index built from a fully loaded
// model matches the model loaded for serving.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sparsenet/config.h"

namespace sparsenet::engine {

class OutputFingerprint {
  public:
    // n output units, k source units; the matrix stored [k, n] (transposed: [n, k]); the layer's
    // activation (a SoftMax layer's items rank by their logits: DenseOutputEdge::logits).
    OutputFingerprint(uint32_t n, uint32_t k, bool transposed, Activation activation);
    // The next `count` rows of the stored matrix, `cols` values each, rows ld floats apart.
    void add_rows(const float* rows, size_t count, size_t cols, size_t ld);
    // The fingerprint, after every row: the biases [n] last.
    uint64_t finish(const float* bias, size_t n) const;

  private:
    uint64_t h_;
};

}  // namespace sparsenet::engine
