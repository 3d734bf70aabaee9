// The network's inference part, as the Predictor uses it: which layer to read, the inference
// forward pass over bound data, and a layer's scores (whole rows, gathered from every rank of a
// split network) or their top-K (each rank's band ranked on the device, then merged). The
// Predictor batches rows, checks its exclusion dataset and assembles the results; it never sees
// Network::Impl (network_scoring.cpp is the network's own file). Also the output edge that the
// Recommender's fp16 screening copies (dense_output_edge).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/network_bindings.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"

namespace sparsenet::engine {

// A layer's units and this rank's band of them (offset, n_local: all of them on one rank).
struct LayerUnits {
    std::string name;
    uint32_t n = 0;
    uint32_t offset = 0;
    uint32_t n_local = 0;
};

// A layer as a serving caller sees it (the Recommender): its name, units, dataset and input
// normalisation.
struct LayerView {
    std::string name;
    std::string dataset;  // Input and Output layers
    uint32_t n = 0;
    uint32_t ld = 0;  // non-input layers: the row stride forward_into's act[l] has
    bool input = false;
    bool output = false;
    float normalize_l2 = 0.0f;  // Input layers: rows scaled to this L2 norm (0: as they are)
};
std::vector<LayerView> layer_views(const Network& network);

// The inference forward pass into activations the caller owns (act[l]: [rows.batch, n of layer
// l], row stride LayerView::ld, for every non-input layer, its padding columns [n, ld) zeros:
// the GEMMs may run over them, backend/gemm_extents.h) on backend `be`, the network only read:
// several threads may run it at once, each with its own buffers and backend, while nothing modifies
// the network (the Recommender does). skip_layer: a layer no other reads, left uncomputed.
void forward_into(const Network& network, Backend& be, const std::vector<float*>& act,
                  const Bindings& data, const BatchRows& rows, int skip_layer = -1);

// An output layer fed by one dense edge, as the Recommender's fp16 screening reads it.
struct DenseOutputEdge {
    // Why the layer has no such edge ("" when it has): not exactly one source edge, a sparse
    // (Input) source, Skip sources, other layers reading it, or a split network.
    std::string unsupported;
    // A SoftMax layer: its items are ranked by their logits z_j = h . w_j + b_j (`activation` is
    // then Linear), which order them as the probabilities do within a query (SoftMax is monotone
    // in each logit); the probability needs the normaliser over every item, which a screen or an
    // index does not compute, so what they return is the logit.
    bool logits = false;
    int source = -1;  // the layer whose activations the edge multiplies
    uint32_t k = 0;   // source units
    uint32_t n = 0;   // output units
    // The matrix the edge multiplies by: element (q, j) of [k, n] is stored[q * ld + j], or
    // stored[j * ld + q] when the edge uses its owner's matrix transposed (then stored is
    // [n, k], row stride ld). Backend memory of the network, valid while it lives.
    const float* stored = nullptr;
    uint32_t ld = 0;
    // stored == nullptr: the matrix was never kept (LoadOptions::release_output), and this is the
    // fingerprint of what the load read (output_fingerprint's value for the matrix in memory).
    uint64_t released_fingerprint = 0;
    bool transposed = false;
    const float* bias = nullptr;  // [n], backend memory
    formulas::ActivationParams activation;
    std::string weight_name;  // "weight:<source>-><layer>"
};
DenseOutputEdge dense_output_edge(const Network& network, int output);
// Frees the matrix of layer `output`'s dense source edge (DenseOutputEdge) when that edge owns it
// and no other edge uses it, and then the layer's bias, for a server that ranks from a copy of
// its own (the ANN index's re-ranking vectors). The network must never run that layer again
// (forward_into with skip_layer = output only). Returns the bytes freed (0: kept, being shared).
size_t release_output_matrix(Network& network, int output);

class Scoring {
  public:
    explicit Scoring(Network& network) : net_(network.impl()) {}

    // `name` (any non-input layer), or by default the first Output layer in the config's order
    // (DSSTNE's predict reads the layer named "Output"). Error(kUsage) otherwise.
    int layer(const std::string& name) const;
    LayerUnits units(int layer) const;
    Backend& backend() const;
    bool split() const;

    // Whether top_k of layer l can apply the layer's activation itself (defer_output_activation
    // below): one rank, l an Output layer with an element-wise activation (SoftMax needs its
    // row's max and sum first), and no layer reading an Output layer's activations (the deferred
    // forward pass leaves every Output layer's z as it is).
    bool fuses_activation(int l) const;

    // The inference forward pass (no dropout, no noise) over rows of the bound data, into the
    // network's own activation buffers (grown to `rows.batch` rows). defer_output_activation
    // (only where fuses_activation holds for the layer to be ranked): the Output layers are
    // left as z, without bias and activation, for top_k(..., activation_pending = true).
    void forward(const Bindings& data, const BatchRows& rows, bool defer_output_activation = false);
    // After forward(): layer l's activations of its `count` rows, whole ([count, n] row-major;
    // a split network's bands gathered from every rank, on every rank).
    std::vector<float> scores(int l, size_t count) const;
    // After forward(): the top k of each of the `count` rows of layer l, best first, ties to the
    // lower column, never a column of `exclude` (this rank's band of it on a split network;
    // nullable); out_scores / out_indices [count, k] on the host, whole-layer columns.
    // activation_pending: after forward(..., defer_output_activation = true), the bias and
    // activation of layer l are applied inside the selection (Backend::top_k's activation): the
    // same scores and columns bit for bit, one pass over the [count, n] scores less.
    void top_k(int l, size_t count, const CsrBatchView* exclude, uint32_t k, float* out_scores,
               uint32_t* out_indices, bool activation_pending = false) const;

  private:
    Network::Impl& net_;
    // top_k's device results, grown to the largest count * k asked for.
    mutable DeviceArray<float> top_scores_;
    mutable DeviceArray<uint32_t> top_indices_;
};

}  // namespace sparsenet::engine
