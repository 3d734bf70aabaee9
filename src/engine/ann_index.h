// ANN index: approximate maximum-inner-product search over the output layer's item vectors
// (docs/serving.md, "ANN index"). Not DSSTNE's "index" (label files, index_file.h): that name
// stays with the label files; this one is always an "ANN index", its files `.ann`.
//
// For an output layer fed by one dense edge with an element-wise monotone activation f, item j's
// score is f(h . w_j + b_j), so its rank is that of the inner product of [h, 1] with
// v_j = [w_j, b_j]. The index stores x_j = [v_j, sqrt(R^2 - |v_j|^2)] (R = max |v_j|) and
// searches the query [h, 1, 0] by L2 distance: |q - x_j|^2 = |q|^2 + R^2 - 2 q . v_j, the same
// order as the inner product (the classic reduction of MIPS to nearest neighbours), which
// k-means cells and graph search handle far better than raw inner products.
//
// The index only proposes candidates; AnnRanker scores them exactly, with the full path's own
// ops (gemm over their fp32 weights, bias_activation_forward, top_k): the same bits as the full
// forward pass for every candidate (the argument of output_screen.cpp).
//
// The vectors are stored in FP32, or with the weights w_j in 16 bits (AnnVectors, ann_vectors.h:
// fp16 or bf16; rounded first, R and the augmentation computed from the rounded values) and b_j
// and the augmentation in FP32; the distances (ann_vectors.h) widen them on the fly and the query's
// h is rounded the same way. The re-ranking reads the index's vectors (widened: no FP32 copy of
// the weights is kept), so with 16-bit vectors a candidate's score is the output layer's formula
// over its rounded weights and its own bias, bit for bit what the model with those rounded
// weights computes.
//
// Kinds: ivf (the default: k-means cells, ann_ivf.h), hnsw (hnswlib's graph, ann_hnsw.h) and
// flat (exhaustive: one cell scanned whole). Every kind ranks by the stored vectors' L2 distance
// (ann_vectors.h). ivf and flat need nothing beyond the engine (OpenBLAS for k-means); hnsw needs
// hnswlib (CMake's SPARSENET_HNSWLIB): without it available(kHnsw) is false and building or
// loading an hnsw index throws Error(kUsage) saying so. The file: ann_file.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/ann_vectors.h"
#include "engine/network_scoring.h"
#include "engine/output_screen.h"
#include "sparsenet/ann_index.h"

namespace sparsenet {

class Network;

namespace engine {

using AnnBuildOptions = AnnIndexOptions;
using AnnBuildReport = AnnIndexReport;

// The item vectors of an index, `dims` values each: [w_j, b_j, sqrt(R^2 - |v_j|^2), 0...], as FP32
// floats or with w_j in a 16-bit encoding (rounded first: R and the augmentation come from the
// rounded values), item after item: the bytes an index stores, vector_bytes each. The weights
// arrive as values (q, j) of the stored [k, n] matrix, from memory or block of rows by block of
// rows from a streamed load (LoadOptions::output_rows), so that no FP32 matrix is held beside the
// vectors; the same bytes either way. With ANN index support only.
class ItemVectors {
  public:
    // `what` names the model in the error of a weight beyond a 16-bit encoding's range.
    ItemVectors(uint32_t n, uint32_t k, AnnVectors vectors, uint32_t dims, std::string what);
    // Rows [first, first + rows) of the [k, n] matrix, row stride ld.
    void add_rows(uint64_t first, uint64_t rows, const float* values, size_t ld);
    void add_item(size_t j, const float* w);  // item j's k weights (a transposed matrix's row)
    uint64_t rows_seen() const { return rows_seen_; }
    // The vectors, after every weight: the biases [n] in, R (radius) and the augmentation.
    std::vector<char> finish(const float* bias, float* radius);

  private:
    void set(size_t j, size_t q, float w);
    size_t n_, k_;
    AnnVectors vectors_;
    uint32_t dims_;
    std::string what_;
    size_t item_bytes_, halves_;
    std::vector<char> bytes_;
    uint64_t rows_seen_ = 0;
};
// The kinds of index (AnnIndexOptions::kind names them): k-means cells, hnswlib's graph, or
// every item scanned (exhaustive).
enum class AnnKind { kIvf, kHnsw, kFlat };
const char* to_string(AnnKind kind);  // "ivf", "hnsw", "flat"
// The kind named `name`; Error(kUsage) "<what> '<name>': expected one of ivf, hnsw, flat".
AnnKind parse_ann_kind(const std::string& name, const std::string& what);

// Identifies an output layer's weights and biases: a 64-bit hash of their bits, with the shape.
uint64_t output_fingerprint(const DenseOutputEdge& edge);

class AnnIndex {
  public:
    // Whether this build can build and load ANN indexes of `kind` (hnsw: hnswlib was found).
    static bool available(AnnKind kind);
    static const char* kinds();  // "ivf, hnsw, flat"
    // Whether the index file at `path` holds its item vectors (ivf, hnsw), so that a server need
    // not keep the model's output matrix to load it; a flat index is rebuilt from that matrix
    // (false too for a file that is not an index: the constructor says what is wrong with it).
    static bool holds_vectors(const std::string& path);

    // Builds the ANN index of layer `output` of `network` (loaded from `model_path`) into
    // `out_path`. Error(kUsage) for a layer whose items are not inner products (SoftMax, several
    // sources: DenseOutputEdge::unsupported) or bad options, kIo when the file cannot be written.
    // streamed: the item vectors a streamed load assembled (the network then holds no output
    // matrix); nullptr: from the network's matrix.
    static AnnBuildReport build(const Network& network, int output, const std::string& model_path,
                                const AnnBuildOptions& options, const std::string& out_path,
                                ItemVectors* streamed = nullptr);

    // Loads `path` for layer `output` of `network`: Error(kIo) naming the file when it is not a
    // sparsenet ANN index, is truncated or corrupt; Error(kData) naming it when it was built from
    // another model (another layer name, shape or fingerprint of the weights).
    AnnIndex(const std::string& path, const Network& network, int output,
             const std::string& model_path);
    ~AnnIndex();
    AnnIndex(const AnnIndex&) = delete;
    AnnIndex& operator=(const AnnIndex&) = delete;

    AnnKind kind() const;
    AnnVectors vectors() const;  // how the file stores the item vectors
    bool exhaustive() const { return kind() == AnnKind::kFlat; }  // candidates: the exact order
    const std::string& path() const;
    uint64_t items() const;
    uint32_t probe() const;
    // The accuracy knob (ivf: cells scanned; hnsw: efSearch; flat: none). Not thread-safe: set it
    // before concurrent searches. 0 keeps the file's.
    void set_probe(uint32_t probe);
    // The index in memory, its copy of the item vectors included, by kind: ivf's cells (centroids
    // and item lists) and vectors, flat's vectors, or hnswlib's graph (vectors, links, labels)
    // with its per-item tables (levels, link pointers, visited marks) and ours (item -> graph id).
    size_t memory_bytes() const;

    // Item j's weights as the index stores them, widened to FP32: w_j (width floats) into dst,
    // and its bias b_j. FP32 vectors are the model's own bits (the fingerprint matched), 16-bit
    // ones their rounding. Thread-safe.
    void item_row(uint32_t j, float* dst) const;
    float item_bias(uint32_t j) const;

    // Up to `fetch` candidate items for a query whose source activations are h [width], best
    // first by the index's (approximate) order, into ids (cleared first). Thread-safe; runs on
    // the calling thread only. Fewer than fetch when the probed cells hold fewer items.
    void search(const float* h, size_t fetch, std::vector<int64_t>& ids,
                std::vector<float>& scratch) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Exact scores of chosen items of a dense output layer, by the full path's own ops.
class AnnRanker {
  public:
    // The item vectors come from `index` (its stored copy: no other) when given, else from a
    // copy of the item rows [n, k] (none when the network's matrix already is that, packed) and
    // of the biases. Error(kUsage) when the layer cannot be ranked so (edge.unsupported).
    AnnRanker(const Network& network, int output, const AnnIndex* index = nullptr);
    int source() const { return edge_.source; }
    size_t width() const { return edge_.k; }
    bool logits() const { return edge_.logits; }  // a SoftMax layer: scores are its logits
    size_t memory_bytes() const { return (rows_.size() + bias_.size()) * sizeof(float); }

    using Scratch = CandidateScratch;  // output_screen.h
    // Top-k of `candidates` (distinct item ids) for source activations h: out_scores / out_ids
    // [k], best first, ties to the lower id when the candidates are sorted ascending; UINT32_MAX
    // past the candidates' end.
    void rank(Backend& be, const float* h, const std::vector<uint32_t>& candidates, uint32_t k,
              Scratch& s, float* out_scores, uint32_t* out_ids) const;
    // The same over every item but the sorted unique `excluded` (the full product's answer,
    // bit for bit), in chunks: what a query the index cannot fill falls back to.
    void rank_all(Backend& be, const float* h, const std::vector<uint32_t>& excluded, uint32_t k,
                  Scratch& s, float* out_scores, uint32_t* out_ids) const;

  private:
    void row(uint32_t j, float* dst) const {
        if (index_) {
            index_->item_row(j, dst);
        } else {
            std::copy_n(item_rows_ + size_t(j) * edge_.k, edge_.k, dst);
        }
    }
    float bias(uint32_t j) const { return index_ ? index_->item_bias(j) : bias_[j]; }

    DenseOutputEdge edge_;
    const AnnIndex* index_ = nullptr;
    std::vector<float> rows_;
    const float* item_rows_ = nullptr;  // [n, k]
    std::vector<float> bias_;
};

}  // namespace engine
}  // namespace sparsenet
