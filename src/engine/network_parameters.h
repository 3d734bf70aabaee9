// The network's parameters: what a model file saves and restores (the weights and biases, and a
// checkpoint's optimizer state). Private to the network: only network_impl.h includes it.
//
// Allocated by Network::Impl::allocate_parameters (values) and ensure_optimizer_state (state
// slots); written by initialize_weights / initialize_biases, restore, Network::set_parameter and
// every optimizer step (update). Every block is this rank's (ParallelPlan gives its shape).
// The BF16 weight copies (EdgeParams::w_bf16) are allocated by sync_bf16_copies and written at
// each of those writes of w.
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

// What a network holds of a matrix: its FP32 values (and, in kBf16, their BF16 copy), or only
// what a streamed load (Network::load, LoadOptions) kept: the BF16 copy, or nothing.
enum class Kept { kFp32, kBf16Only, kNothing };

// Edge e's matrix (Parameters::edges[e]; empty unless the edge owns its matrix: an edge that
// uses another's (SharedWeights) multiplies by its owner's).
struct EdgeParams {
    Kept kept = Kept::kFp32;            // set before allocate_parameters, never changed afterwards
    DeviceArray<float> w;               // [local_rows, local_cols] row-major, this rank's block
    DeviceArray<float> state1, state2;  // optimizer state slots, the shape of w
    // Precision::kBf16: w rounded to BF16 (formulas::bf16_bits), laid out like w (the same ld,
    // zeros in the padding), which every GEMM that reads the matrix reads instead of rounding w
    // itself (ConstMatrixView::bf16); empty in FP32 and TF32, and for a matrix only csr_matmul
    // reads (Network::Impl::keeps_bf16_copy). It lives here, with the parameters, and not in
    // the pass buffers, because it is a function of w alone: written wherever w is written (the
    // optimizer's pass itself where the step is a pass of its own, one round_bf16 pass after
    // a step inside the weight-gradient GEMM, a sparse step, WeightNorm, a load, an
    // initialisation, set_parameter), so it changes once per step, not per batch or per GEMM,
    // and has w's lifetime. It is never saved: a file holds the FP32 master, and a load rounds
    // it again (the same bits).
    DeviceArray<uint16_t> w_bf16;
    // Exact Momentum/Nesterov updates of a row-sparse gradient (Network::Impl::update): the
    // step each of this rank's rows is current as of ([local_rows], RowClock). Never saved:
    // every reader of the weights (a file, a parameter, an inference pass) first catches all
    // rows up (Network::Impl::catch_up_all), after which the clock is the step count.
    DeviceArray<uint32_t> row_clock;
};

// Slot s of an owner edge's matrix or of a layer's bias (const or not): 0 the values, 1 and 2
// the optimizer's state (the model file's io::ModelSlot).
template <typename Edge>
auto& weight_slot(Edge& edge, int s) {
    return s == 0 ? edge.w : s == 1 ? edge.state1 : edge.state2;
}
template <typename Layer>
auto& bias_slot(Layer& layer, int s) {
    return s == 0 ? layer.bias : s == 1 ? layer.bias_state1 : layer.bias_state2;
}

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
    // Network::keep_only_bf16_weights ran: the FP32 w of every matrix only GEMMs read is freed
    // (empty), its w_bf16 kept; an inference network (Network::Impl::require_fp32_weights).
    bool bf16_only = false;
    // Network::load with LoadOptions::release_output: the output layer whose source matrix was
    // never kept (-1: none), and the fingerprint of what was read of it (output_fingerprint.h).
    int released_output = -1;
    uint64_t released_fingerprint = 0;
};

}  // namespace sparsenet::engine
