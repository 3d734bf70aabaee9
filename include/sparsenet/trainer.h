// Trainer: epochs of minibatch training of a Network on named datasets.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/optimizer.h"

namespace sparsenet {

struct BatchProgress {
    uint32_t epoch = 0;     // 1-based
    uint64_t batch = 0;     // 1-based within the epoch
    uint64_t batches = 0;   // per epoch
    uint64_t examples = 0;  // seen so far in this epoch
    double loss = 0.0;      // mean loss per example so far in this epoch
    double seconds = 0.0;   // since the epoch started
};

struct EpochStats {
    uint32_t epoch = 0;
    double loss = 0.0;  // mean loss per example over the epoch (training mode: dropout on)
    uint64_t examples = 0;
    double seconds = 0.0;
    double examples_per_second = 0.0;
    uint64_t batches = 0;  // optimizer steps taken in this epoch
    // false when Trainer::cancel() stopped the epoch before its last batch; loss and examples
    // then cover the batches that ran.
    bool complete = true;
};

struct TrainOptions {
    uint32_t epochs = 40;
    uint32_t batch = 1024;
    OptimizerOptions optimizer;
    uint64_t seed = 12134;        // shuffling, dropout and denoising masks
    std::optional<bool> shuffle;  // default: the config's ShuffleIndices
    // DSSTNE's Decay (>= 0): step t uses learning rate alpha / (1 + decay * (t - 1)), t counting
    // every optimizer step of the network's current optimizer state. Default: the config's Decay.
    std::optional<float> decay;
    std::function<void(const BatchProgress&)> on_batch;  // called after every batch
    std::function<void(const EpochStats&)> on_epoch;     // after every complete epoch
    // Early stopping: called by fit() after every complete epoch (after on_epoch); true ends
    // fit() there. E.g. stop when a validation metric computed in on_epoch stops improving.
    std::function<bool(const EpochStats&)> early_stop;
};

// The options a config describes: its Training section (sparsenet's defaults for absent keys, or
// for every key when the section is absent) and its Decay. Callbacks are empty and shuffle unset
// (the Trainer then follows ShuffleIndices). `sparsenet train` starts from these and applies its
// command-line flags on top; a program may do the same.
TrainOptions train_options(const NetworkConfig& config);

class Trainer {
  public:
    // datasets: by name; every Input/Output layer's DataSet must be present, all with the same
    // number of examples. The datasets are uploaded to the network's backend once, here;
    // indexed ones expanded to one row per example. A weighted Output dataset multiplies each
    // example's loss and output delta by its weight (weights of Input datasets change nothing);
    // an Output dataset with sparse_ignore_zero counts its stored targets only. Options out of
    // range (validate(OptimizerOptions), batch 0, a negative decay) are Error(kUsage).
    Trainer(Network& network, const std::map<std::string, const Dataset*>& datasets,
            TrainOptions options);
    ~Trainer();

    // One more epoch. Stops early at a batch boundary when cancel() was called: the stats then
    // have complete == false; with no batch run (cancelled before it started) epoch stays at
    // epochs_done() and examples at 0.
    EpochStats train_epoch();
    // options.epochs epochs, fewer when early_stop says so or cancel() is called; returns the
    // stats of every epoch that ran, a cancelled partial one last.
    std::vector<EpochStats> fit();

    // Asks a running (or the next) train_epoch() / fit() to stop after the batch in progress:
    // that batch's forward pass, backward pass and optimizer step complete, so the network is
    // consistent and may be saved, used to predict, or trained further (the next epoch takes a
    // fresh permutation). Safe to call from any thread, a callback included, at any time while
    // this Trainer exists. The request is consumed by the train_epoch() / fit() it stops.
    void cancel() noexcept;
    bool cancel_requested() const noexcept;

    // Mean loss per example over all rows, in inference mode (no dropout, no denoising). With
    // example weights: the sum of the weighted example losses divided by the number of examples.
    // L1/L2 regularisation is not part of it.
    double evaluate_loss();

    // For gradient checks: the gradient of the mean inference-mode loss over rows
    // [first_row, first_row + count), by parameter name, without updating anything.
    std::map<std::string, std::vector<float>> compute_gradients(uint64_t first_row, uint32_t count);
    // The mean inference-mode loss over the same rows.
    double compute_loss(uint64_t first_row, uint32_t count);

    uint32_t epochs_done() const;  // epochs started, a cancelled partial one included

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sparsenet
