// The network's training part, as the Trainer uses it: one batch's gradients (this rank's share
// under data parallelism, summed over the ranks), the optimizer step, the loss of rows, the
// gradients by parameter name (gradient checks), the numerical-health probes the Trainer's guard
// reads, and the parameters a checkpoint writes and restores. The Trainer keeps the epochs,
// batches, permutation, guard windows, checkpoints' timing and progress; it never sees
// Network::Impl (network_training.cpp is the network's own file, like network_scoring.cpp for
// the Predictor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "engine/network_bindings.h"
#include "io/model_file.h"
#include "sparsenet/network.h"
#include "sparsenet/optimizer.h"

namespace sparsenet::engine {

class Training {
  public:
    // Error(kUsage) for a network that keeps only its BF16 weights (keep_only_bf16_weights).
    explicit Training(Network& network);

    // The network's backend and the communicator of its job's ranks.
    Backend& backend() const;
    Communicator& comm() const;
    int job_rank() const;
    int job_ranks() const;
    // Data parallelism: every rank holds the whole network and runs its share of each batch.
    bool data_parallel() const;
    // Model parallelism: every layer's units are split over the ranks.
    bool split() const;
    const NetworkConfig& config() const;

    // FixedWeights: whether a new network's fixed matrices still wait for their fit, and the fit
    // itself (EASE, GraphFilter: linear_fit.h) from the training rows of each fixed edge's source
    // layer in `datasets` (by dataset name, the rows as stored: Normalize does not apply); the
    // fits of several entries of one source are summed into the edge's matrix. Every rank
    // fits the whole matrix from the whole data (a split network refuses FixedWeights).
    bool fits_pending() const;
    void fit_fixed_weights(const std::map<std::string, const Dataset*>& datasets);

    // Grows the activation, delta and sparse-gradient buffers for batches of up to `rows` rows
    // holding up to `input_nnz` stored input entries.
    void reserve(size_t rows, size_t input_nnz);
    // Allocates the optimizer's state slots for `kind` (zeroed) unless allocated.
    void ensure_optimizer_state(OptimizerKind kind);

    // The rows of `batch` this rank runs: all of them, or its share [batch * r / P,
    // batch * (r + 1) / P) under data parallelism.
    size_t share_of(const BatchRows& batch) const;
    // One batch's forward and backward in training mode (dropout and denoising keyed by
    // mask_seed): every trained parameter's gradient of the batch (under data parallelism this
    // rank's share, summed over the ranks and scaled by the whole batch), the batch's loss added
    // to *loss_sum (this rank's part of it).
    void compute_batch_gradients(const Bindings& data, const BatchRows& batch, uint64_t mask_seed,
                                 double* loss_sum);
    // One optimizer step on every trained parameter (decay: DSSTNE's Decay, Network::Impl::update).
    void update(const OptimizerOptions& optimizer, float decay);
    // Brings every row of the exact Momentum/Nesterov sparse updates up to the step count
    // (Network::Impl::catch_up_all): at the end of an epoch, before anything reads the weights.
    void catch_up_all();
    // The widest sparse-input matrix whose exact update under `optimizer` (decay: DSSTNE's
    // Decay) walks every row each step: its rows and the edge's name ("weight:<in>-><out>"),
    // or 0 rows when none does (SGD and AdaGrad without regularisation visit the touched rows;
    // Momentum and Nesterov keep a row clock; lazy updates never walk every row).
    std::pair<uint64_t, std::string> every_row_sparse_matrix(const OptimizerOptions& optimizer,
                                                             float decay) const;

    // The inference-mode forward pass over `rows` and every loss term of the objective, added to
    // *loss_sum (a split network's rank: its columns' part).
    void add_losses(const Bindings& data, const BatchRows& rows, double* loss_sum);
    // The inference-mode gradients of `rows` (no dropout; the loss of these rows, not scaled by
    // a batch), whole, by parameter name: "weight:<source>-><destination>" of each owned and
    // trained (not fixed) matrix
    // and "bias:<layer>" of each non-input layer. Collective on a split network.
    std::map<std::string, std::vector<float>> parameter_gradients(const Bindings& data,
                                                                  const BatchRows& rows);

    // Numerical health. The checked layers are the non-input layers in forward order.
    size_t checked_layers() const;
    const std::string& checked_layer_name(size_t k) const;
    // Whether this rank's bias gradients of the last batch hold a NaN or an infinity: a
    // non-finite parameter or activation reaches them through the deltas (a loss may stay
    // finite: its formulas clamp probabilities). One float per layer travels to the host.
    bool local_gradients_nonfinite();
    // On the device, nothing to the host: for each checked layer k, flags[3k .. 3k + 2] := the
    // sums of squares of its bias gradient (0 where it reaches no output), of its activations of
    // the last `rows` rows and of its bias (all 0 on a rank holding none of its units). An
    // output layer whose delta is written over its activations (LayerBand::delta_over_act) gives
    // its deltas' sum instead: a function of the activations, NaN where they are NaN for every
    // loss but those whose delta is 0 beyond a margin (the marginal cross-entropies, Hinge, L1);
    // the guard itself reads only the bias gradients and the loss.
    void record_health(float* flags, size_t rows) const;
    // Collective, after a non-finite loss or gradient: the first layer in forward order whose
    // incoming weights, bias or activations of the last `rows` rows (an output layer's deltas
    // where they were written over its activations) hold a NaN or an infinity;
    // failing that, the first whose gradients do (for the bias gradient, also values so large
    // that the guard's sum of squares overflows: with learning rate 1e30 the parameters and
    // activations can stay finite while only that sum overflows, and without this pass the
    // message named no layer).
    std::string locate_nonfinite(size_t rows) const;
    // Collective: "" when every parameter is finite, else what is not (Network::Impl's).
    std::string nonfinite_parameters() const;

    // Checkpoints: the optimizer state's kind and step count, the collective atomic write of
    // the model with `state`, and the restore of every parameter and optimizer slot from a file
    // (each rank reading its blocks) with the step count it was written at.
    OptimizerKind state_kind() const;
    uint64_t optimizer_steps() const;
    void write_file(const std::string& path, const io::ModelTrainingState& state) const;
    void restore(const io::ModelReader& file, uint64_t optimizer_steps);

  private:
    // matrix [rows, cols] (row stride ld) += packed host rows [rows, cols] (fit_fixed_weights).
    void add_rows(DeviceArray<float>& matrix, size_t ld, size_t rows, size_t cols,
                  const float* packed);

    Network::Impl& net_;
    DeviceArray<float> guard_;  // [layers]: local_gradients_nonfinite's squared norms
};

}  // namespace sparsenet::engine
