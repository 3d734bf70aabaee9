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
    uint64_t seed = 12134;                               // shuffling, dropout and denoising masks
    std::optional<bool> shuffle;                         // default: the config's ShuffleIndices
    std::function<void(const BatchProgress&)> on_batch;  // called after every batch
    std::function<void(const EpochStats&)> on_epoch;
};

class Trainer {
  public:
    // datasets: by name; every Input/Output layer's DataSet must be present, all with the same
    // number of examples. The datasets are uploaded to the network's backend once, here;
    // indexed ones expanded to one row per example. Weights of Input datasets are ignored; a
    // weighted Output dataset is Error(kNotImplemented) (no per-example weights in the loss yet).
    Trainer(Network& network, const std::map<std::string, const Dataset*>& datasets,
            TrainOptions options);
    ~Trainer();

    EpochStats train_epoch();       // one more epoch
    std::vector<EpochStats> fit();  // options.epochs epochs

    // Mean loss per example over all rows, in inference mode (no dropout, no denoising).
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
