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
    std::function<void(const EpochStats&)> on_epoch;
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

    EpochStats train_epoch();       // one more epoch
    std::vector<EpochStats> fit();  // options.epochs epochs

    // Mean loss per example over all rows, in inference mode (no dropout, no denoising). With
    // example weights: the sum of the weighted example losses divided by the number of examples.
    // L1/L2 regularisation is not part of it.
    double evaluate_loss();

    // For gradient checks: the gradient of the mean inference-mode loss over rows
    // [first_row, first_row + count), by parameter name, without updating anything.
    std::map<std::string, std::vector<float>> compute_gradients(uint64_t first_row, uint32_t count);
    // The mean inference-mode loss over the same rows.
    double compute_loss(uint64_t first_row, uint32_t count);

    uint32_t epochs_done() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sparsenet
