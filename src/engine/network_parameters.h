// The network's parameters: what a model file saves and restores (the weights and biases, and a
// checkpoint's optimizer state). Private to the network: only network_impl.h includes it.
//
// Allocated by Network::Impl::allocate_parameters (values) and ensure_optimizer_state (state
// slots); written by initialize_weights / initialize_biases, restore, Network::set_parameter and
// every optimizer step (update). Every block is this rank's (ParallelPlan gives its shape).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "sparsenet/optimizer.h"

namespace sparsenet::engine {

// Layer l's bias (Parameters::layers[l]; empty for input layers).
struct LayerParams {
    DeviceArray<float> bias;                      // [n_local]
    DeviceArray<float> bias_state1, bias_state2;  // optimizer state slots, [n_local] each
};

// Edge e's matrix (Parameters::edges[e]; empty unless the edge owns its matrix: an edge that
// uses another's (SharedWeights) multiplies by its owner's).
struct EdgeParams {
    DeviceArray<float> w;               // [local_rows, local_cols] row-major, this rank's block
    DeviceArray<float> state1, state2;  // optimizer state slots, the shape of w
    // Exact Momentum/Nesterov updates of a row-sparse gradient (Network::Impl::update): the
    // step each of this rank's rows is current as of ([local_rows], RowClock). Never saved:
    // every reader of the weights (a file, a parameter, an inference pass) first catches all
    // rows up (Network::Impl::catch_up_all), after which the clock is the step count.
    DeviceArray<uint32_t> row_clock;
};

struct Parameters {
    std::vector<LayerParams> layers;  // by layer index
    std::vector<EdgeParams> edges;    // by edge index
    // The optimizer whose state slots are allocated, and the steps taken with it (a checkpoint
    // saves both; the learning rate's decay counts the steps).
    OptimizerKind state_kind = OptimizerKind::kSgd;
    uint64_t optimizer_steps = 0;
    // Fixed edges (GraphEdge::fixed) wait for their fit: set when initialize_weights() starts a
    // new network, cleared by the fit (engine::Training::fit_fixed_weights) or by reading a file.
    bool fits_pending = false;
};

}  // namespace sparsenet::engine
