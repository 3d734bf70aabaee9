// The engine's view of a network: layers, weights and their buffers on one backend.
// Backend-agnostic: every computation is a named op of backend.h.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/device_dataset.h"
#include "sparsenet/network.h"

namespace sparsenet {

namespace engine {

struct Layer {
    LayerConfig config;
    uint32_t n = 0;
    formulas::ActivationParams activation;  // kind and parameters (non-input layers)
    std::vector<int> in_weights;   // weights whose destination is this layer, in Source order
    std::vector<int> out_weights;  // weights whose source is this layer
    std::vector<int> skips;        // layers whose activations are added to this layer's z (Skip)
    std::vector<int> out_skips;    // layers that skip this layer's activations into theirs
    bool reaches_output = false;   // its delta is needed in backward
    DeviceArray<float> bias;       // [n] (non-input layers)
    DeviceArray<float> bias_grad;
    DeviceArray<float> bias_state1, bias_state2;
    DeviceArray<float> act;    // [batch_capacity, n]: activations (non-input layers)
    DeviceArray<float> delta;  // [batch_capacity, n]: dL/dA, then dL/dZ
    bool is_input() const { return config.kind == LayerKind::kInput; }
    bool is_output() const { return config.kind == LayerKind::kOutput; }
};

// One Source edge (source -> destination: z_destination += a_source . M). An edge owns its
// matrix M = w, or (SharedWeights) uses the matrix of its owner edge, transposed or not; then
// w, the optimizer state and the dense gradient live on the owner only, and the owner's
// gradient sums every use before the one optimizer step.
struct Weight {
    int source = -1;             // layer index
    int destination = -1;        // layer index
    uint32_t rows = 0;           // source units
    uint32_t cols = 0;           // destination units
    bool sparse_source = false;  // the source is a sparse input layer (csr ops)
    int owner = -1;              // the edge whose matrix this edge uses (itself if it owns one)
    bool transposed = false;     // uses the owner's matrix transposed: owner is [cols, rows]
    int users = 1;               // owners: the edges using this matrix, itself included
    // Owners: the gradient is dense ([rows, cols] in grad) unless the only use is a sparse
    // source, which keeps the row-sparse gradient below.
    bool dense_grad = true;
    bool grad_ready = false;  // owners: backward wrote the gradient of the current batch
    DeviceArray<float> w;     // [rows, cols] (owners)
    DeviceArray<float> state1, state2;
    DeviceArray<float> grad;  // dense gradient [rows, cols] (owners with dense_grad)
    // Row-sparse gradient of this edge (sparse sources): [capacity, cols] + rows + count. For
    // a shared matrix it is scattered into the owner's dense gradient.
    DeviceArray<float> sparse_values;
    DeviceArray<uint32_t> sparse_rows;
    DeviceArray<uint32_t> sparse_count;
    size_t sparse_capacity = 0;
    SparseRowGrad sparse_grad() {
        return {sparse_rows.data(), sparse_count.data(), sparse_values.data(), sparse_capacity,
                cols};
    }
};

// Datasets bound to input and output layers for one pass (training or inference).
struct Bindings {
    std::vector<const DeviceDataset*> layer_data;  // by layer index; null for hidden layers
};

}  // namespace engine

struct Network::Impl {
    NetworkConfig config;
    NetworkOptions options;
    std::unique_ptr<Backend> backend;
    std::vector<engine::Layer> layers;
    std::vector<engine::Weight> weights;
    std::vector<int> order;  // topological order of layer indices
    std::map<std::string, int> layer_index;
    size_t batch_capacity = 0;
    size_t sparse_nnz_capacity = 0;  // per-batch nonzero capacity of the sparse gradients
    OptimizerKind state_kind = OptimizerKind::kSgd;
    uint64_t optimizer_steps = 0;

    void build(const std::map<std::string, uint32_t>& dataset_widths);
    // Parts of build(): ties shared edges to their owners, links Skip layers (the config
    // checked names and acyclicity; these check widths and what the engine runs).
    void link_shared_weights(const std::string& where);
    void link_skips(const std::string& where);
    void initialize_weights(uint64_t seed);

    // Grows activation / delta buffers for batches of up to `batch` rows.
    void ensure_batch_capacity(size_t batch);
    // Grows the row-sparse gradient buffers for batches of up to `nnz` input nonzeros.
    void ensure_sparse_capacity(size_t nnz);
    // Allocates optimizer state slots for `kind` (zeroed) if not allocated yet.
    void ensure_optimizer_state(OptimizerKind kind);

    // Forward pass over one batch. training: dropout and denoising on, keyed by mask_seed.
    void forward(const engine::Bindings& data, const BatchRows& rows, bool training,
                 uint64_t mask_seed);
    // The same pass into activations the caller owns, on backend `be`: act[l] is [rows.batch,
    // layers[l].n] (ld = n) for every non-input layer l. It reads the network and writes only
    // act and be's scratch, so several threads may run it at once on one network, each with its
    // own buffers and backend (the Recommender does), while nothing modifies the network.
    void forward(Backend& be, const std::vector<float*>& act, const engine::Bindings& data,
                 const BatchRows& rows, bool training, uint64_t mask_seed) const;
    // Output deltas and backward pass: fills every needed weight/bias gradient.
    // loss_sum (nullable) accumulates the summed loss of the batch.
    void backward(const engine::Bindings& data, const BatchRows& rows, bool training,
                  uint64_t mask_seed, double* loss_sum);
    // One optimizer step on every trained parameter. decay: DSSTNE's Decay, the learning rate of
    // step t (counted by optimizer_steps) is learning_rate / (1 + decay * (t - 1)).
    void update(const OptimizerOptions& optimizer, float decay);

    // The objective's terms that need no gradient: every output loss (scale 1) and every
    // sparseness penalty of the batch, added to *loss_sum. Runs after forward().
    void add_losses(const engine::Bindings& data, const BatchRows& rows, double* loss_sum);

    // The loss of an output layer; `targets` (its bound dataset) sets ignore_zero.
    formulas::LossParams loss_params(const engine::Layer& output,
                                     const engine::DeviceDataset& targets) const;
    // The dropout mask of hidden layer l (alpha dropout on ELU/SELU layers, else inverted).
    DropoutMask dropout_mask(int l, const BatchRows& rows, uint64_t mask_seed) const;
    // Hidden layers whose sparseness penalty is part of the objective.
    bool penalized(const engine::Layer& layer) const;
    SparseNoise input_noise(const engine::Layer& input, bool training, uint64_t mask_seed) const;
    // The matrix edge w multiplies by: its owner's [rows, cols] storage (w.transposed: the edge
    // uses it transposed).
    ConstMatrixView matrix_of(const engine::Weight& w) const {
        const engine::Weight& m = weights[w.owner];
        return {m.w.data(), m.rows, m.cols, m.cols};
    }
    // The layer index of a bias name, or (weights, any edge's name) the owner edge's index.
    int find_parameter(const std::string& name, bool* is_bias) const;
    std::string weight_name(const engine::Weight& w) const;  // "weight:<source>-><destination>"
    // The owner edge wi's gradient of the last backward, dense [rows, cols] (zeros where backward
    // wrote none).
    std::vector<float> weight_gradient(int wi);
    // WeightNorm after the step of owner edge wi: every edge using its matrix clips the incoming
    // vectors of its destination's units (columns of the matrix, or rows when transposed).
    void apply_weight_norms(int wi);
};

}  // namespace sparsenet
