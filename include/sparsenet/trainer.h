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

// A checkpoint just written (TrainOptions::on_checkpoint).
struct CheckpointInfo {
    std::string path;
    uint32_t epochs_complete = 0;  // whole epochs in it
    uint64_t batches_done = 0;     // batches of the next epoch in it (0: at an epoch boundary)
    double seconds = 0.0;          // writing it took
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
    // Called after every batch, in order. On the CPU right after it; on a device backend the
    // loss and the numerical guard stay on the device and the host looks every 16 batches
    // (SPARSENET_SYNC_EVERY_BATCHES=N changes it; 1 restores per-batch calls), at the epoch's end
    // and before a checkpoint, so calls come in bursts that end at most 16 batches late.
    std::function<void(const BatchProgress&)> on_batch;
    std::function<void(const EpochStats&)> on_epoch;  // after every complete epoch
    // Early stopping: called by fit() after every complete epoch (after on_epoch); true ends
    // fit() there. E.g. stop when a validation metric computed in on_epoch stops improving.
    std::function<bool(const EpochStats&)> early_stop;

    // Checkpoints (docs/reliability.md): the parameters, the optimizer's state and the position
    // (epoch, batch, the epoch's loss so far) written atomically to `checkpoint`, a model file
    // with the training state beside it (Network::load and `sparsenet predict` read it as a
    // model). Written after every checkpoint_every-th complete epoch, and after the first batch
    // that ends checkpoint_seconds or more after the last checkpoint (or the start). With both 0
    // only save_checkpoint() writes one. Under several ranks the ranks agree on every decision.
    std::string checkpoint;
    uint32_t checkpoint_every = 0;
    double checkpoint_seconds = 0.0;
    // Key/values stored with every checkpoint (keys: letters, digits and _), returned by resume().
    std::function<std::map<std::string, std::string>()> checkpoint_notes;
    std::function<void(const CheckpointInfo&)> on_checkpoint;  // after each checkpoint written
    // Numerical guard: after every batch the loss (every rank's part summed) must be finite,
    // otherwise training stops with Error(kNumeric) naming the epoch, the batch and the first
    // layer holding a NaN or an infinity; and a checkpoint is written only when every parameter
    // is finite, so the last one written stays the last good one. Nothing is "recovered"
    // silently (no learning-rate cuts).
    bool check_finite = true;
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
    // range (validate(OptimizerOptions), batch 0, a negative decay) are Error(kUsage). A new
    // network's FixedWeights matrices (config.h) are fitted here from these datasets; a network
    // that was loaded, or trained by an earlier Trainer, keeps the ones it has.
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

    uint32_t epochs_done() const;      // epochs started, a cancelled partial one included
    uint32_t epochs_complete() const;  // whole epochs done (a resumed checkpoint's included)

    // Writes a checkpoint to `path` now (collective): the network's parameters and optimizer
    // state, and the position: after the last complete epoch, or inside an epoch stopped by
    // cancel() (a later resume() finishes that epoch). Atomic as Network::save. Error(kNumeric)
    // and nothing written when a parameter is not finite.
    void save_checkpoint(const std::string& path);
    // Continues from a checkpoint (collective): sets the network's parameters, the optimizer's
    // state and the position, so that train_epoch() finishes the checkpoint's epoch (or begins
    // the next) and fit() trains until options.epochs epochs are done in all. The network must
    // have the checkpoint's config (Network::load of the checkpoint gives one) and the training
    // the checkpoint's options: datasets of the same rows, batch size, seed, shuffling,
    // optimizer and its options and decay (Error(kUsage) naming the first that differs; the
    // epochs may differ). On the same device, threads and ranks, a run resumed from a checkpoint
    // ends with the weights an uninterrupted run ends with, bit for bit (CPU backend). Returns
    // the checkpoint's notes.
    std::map<std::string, std::string> resume(const std::string& path);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sparsenet
