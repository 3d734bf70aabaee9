// The network's graph: its layers, the Source edges between them, their order and the names
// of their units. Private to the network: only network_impl.h includes it.
//
// Built once by Network::Impl::build (with link_shared_weights and link_skips) from the config
// and the datasets' widths, then only read: every other method takes it const. The one
// exception is feature_names, which Network::set_feature_names and a load replace (they name
// units, they do not change the graph).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formulas/activation.h"
#include "io/model_file.h"
#include "sparsenet/config.h"

namespace sparsenet::engine {

// Layer l of the config (Graph::layers[l]).
struct GraphLayer {
    LayerConfig config;
    uint32_t n = 0;
    formulas::ActivationParams activation;  // kind and parameters (non-input layers)
    std::vector<int> in_weights;   // edges whose destination is this layer, in Source order
    std::vector<int> out_weights;  // edges whose source is this layer
    std::vector<int> skips;        // layers whose activations are added to this layer's z (Skip)
    std::vector<int> out_skips;    // layers that skip this layer's activations into theirs
    bool reaches_output = false;   // its delta is needed in backward
    bool is_input() const { return config.kind == LayerKind::kInput; }
    bool is_output() const { return config.kind == LayerKind::kOutput; }
};

// One Source edge (source -> destination: z_destination += a_source . M). An edge owns its
// matrix M = w, or (SharedWeights) uses the matrix of its owner edge, transposed or not; then
// w, the optimizer state and the dense gradient live on the owner only, and the owner's
// gradient sums every use before the one optimizer step.
struct GraphEdge {
    int source = -1;             // layer index
    int destination = -1;        // layer index
    uint32_t rows = 0;           // source units
    uint32_t cols = 0;           // destination units
    bool sparse_source = false;  // the source is a sparse input layer (csr ops)
    int owner = -1;              // the edge whose matrix this edge uses (itself if it owns one)
    bool transposed = false;     // uses the owner's matrix transposed: owner is [cols, rows]
    int users = 1;               // owners: the edges using this matrix, itself included
    // FixedWeights (config.h): fitted in closed form before a new network's first step, never
    // trained: no gradient, no optimizer state, no row-sparse gradient buffers.
    bool fixed = false;
    bool fixed_in_training = true;  // false: left out of training-mode forward passes
};

struct Graph {
    // The config as built: "N": "auto" resolved from the datasets' widths.
    NetworkConfig config;
    io::LayerFeatureNames feature_names;  // by layer: names of its units (model files keep them)
    std::vector<GraphLayer> layers;       // in the config's order
    std::vector<GraphEdge> edges;         // one per Source, by destination layer, in Source order
    std::vector<int> order;               // topological order of layer indices
    std::map<std::string, int> layer_index;
};

}  // namespace sparsenet::engine
