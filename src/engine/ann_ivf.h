// IVF cells: the ANN index's kind `ivf` (ann_index.h; docs/serving.md, "ANN index").
//
// The index's stored item vectors x_j = [w_j, b_j, sqrt(R^2 - |v_j|^2)] (FP32 or 16-bit
// weights, ann_vectors.h) are split into `cells` cells by k-means (Lloyd, L2, FP32 arithmetic);
// each cell's vectors are stored together. A query q = [h, 1, 0] computes its L2 distance to
// every centroid (from an fp16 copy of them: the ranking's cost is reading them), then scans the
// cells in order of that distance, `probe` of them (more while
// they hold fewer than `fetch` items), scoring each of their items with the index's own distance
// (the same order as the inner product h . w_j + b_j: every x_j has the norm R), and keeps the
// `fetch` nearest. So within the scanned cells the order is exact (for the stored vectors); only
// an item in a cell not scanned can be missed.
//
// Why cells rather than hnsw's graph (the measurement that decided it, docs/benchmarks-ann.md, "ANN
// index: cells against the graph"): on models trained on generated data with planted topics,
// the graph needed efSearch 4,096 for recall@100 0.95 at 27,278 items (0.62 at 128) and its
// recall varied from build to build, while cells reached 0.94 scanning 6 % of the items, the
// same for every build.
//
// Why L2 cells over the augmented vectors rather than faiss's inner-product cells (spherical
// k-means over [w_j, b_j], centroids ranked by q . c): tried, and no better at equal time. The
// search alone at 1,000,000 items x 256, same queries, one run: inner-product cells recall@100
// 0.925, 0.963, 0.986 at 64, 128, 256 cells in 0.28, 0.44, 0.95 ms; these 0.933, 0.966, 0.991 in
// 0.30, 0.45, 0.92 ms (benchmarks/results/2026-12-02-vm-serve-ann-ip-cells.json).
//
// Deterministic: the k-means sample, its initial centroids and every tie (to the lower cell,
// the lower item) are fixed, and each centroid is the mean of its items summed in item order.
// The distances of a row to the centroids come from one sgemm (OpenBLAS splits its output, not
// its sums, among threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/ann_vectors.h"

namespace sparsenet::engine {

struct IvfCells {
    uint32_t cells = 0;
    uint32_t dims = 0;              // of a centroid: width + 2 ([w, b, augmentation])
    std::vector<float> centroids;   // [cells, dims], FP32
    std::vector<uint64_t> offsets;  // [cells + 1]: cell c holds slots offsets[c] .. offsets[c+1]
    std::vector<uint32_t> item_of;  // [items]: the item stored in each slot
    std::vector<char> vectors;      // [items, item_bytes]: the stored vectors, in slot order
    size_t item_bytes = 0;
    // Derived when built or loaded (finish()): item -> slot, each centroid's |c|^2, and the
    // centroids in fp16 for the search's ranking (scaled by a power of two, centroid_scale, into
    // fp16's range: ranked by |c|^2 - 2 (q . c16) / centroid_scale).
    std::vector<uint32_t> slot_of;
    std::vector<float> centroid_norms;
    std::vector<uint16_t> centroids16;
    float centroid_scale = 1.0f;

    size_t items() const { return item_of.size(); }
    const char* stored(uint32_t item) const {
        return vectors.data() + size_t(slot_of[item]) * item_bytes;
    }
    // The derived tables; false when the cells are inconsistent (offsets not increasing from 0
    // to items, an item out of range or in two slots): a corrupt file.
    bool finish();
    // Bytes held: the vectors, the tables and the centroids.
    size_t memory_bytes() const;

    // Writes item j's stored vector as `dims` FP32 values ([w_j, b_j, a_j], widened) to dst.
    using Decode = std::function<void(size_t j, float* dst)>;
    // k-means over a sample of min(n, 64 * cells) items (10 Lloyd iterations, empty cells
    // reseeded with the farthest item of the largest), then every item assigned to its nearest
    // centroid. `vectors`: n stored vectors of item_bytes, in item order. `threads`: OpenMP's
    // and OpenBLAS's while building (0: as they are); the cells do not depend on it.
    static IvfCells build(const char* vectors, size_t n, size_t item_bytes, uint32_t dims,
                          uint32_t cells, const Decode& decode, int threads = 0);

    // Up to `fetch` items nearest to the query (best first into ids; ties to the lower item):
    // `q` the query as `dims` FP32 values ([h, 1, 0], for the centroids) and `stored_q` in the
    // stored layout (for `distance`). Scans `probe` cells, more while fewer than `fetch` items
    // were seen. Thread-safe; `order` and `heap` are the caller's scratch.
    void search(const float* q, const void* stored_q, AnnDistance distance, const void* param,
                uint32_t probe, size_t fetch, std::vector<int64_t>& ids,
                std::vector<std::pair<float, uint32_t>>& order,
                std::vector<std::pair<float, uint32_t>>& heap) const;
};

// The default number of cells for n items: the power of two at or above 4 sqrt(n) (at most
// 65,536), at most n.
uint32_t ivf_default_cells(uint64_t n);

}  // namespace sparsenet::engine
