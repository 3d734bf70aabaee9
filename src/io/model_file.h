// Model files: one netCDF-4 file holding the network config (JSON) and every parameter, so that
// predict needs nothing else. Layout (DSSTNE-like names):
//   global attributes: sparsenet_model_format = 1, config (canonical JSON, N resolved),
//     name, layers, layer<i>_name, weights, weight<i>_inputLayer, weight<i>_outputLayer
//   variables: weight<i>_weights [weight<i>_height = source units, weight<i>_width = units]
//     (row-major, output contiguous, as DSSTNE); bias<j> [units] with the global attribute
//     bias<j>_layer naming its (non-input) layer.
//   Shared weights (SharedWeights), as DSSTNE: every weight<i> has weight<i>_bShared (0 or 1);
//     a shared one has weight<i>_sourceInputLayer, weight<i>_sourceOutputLayer and
//     weight<i>_bTransposed and no variable: its matrix is stored once, with the owner edge.
//     A file without weight<i>_bShared (written before ties existed) reads as unshared.
//   Checkpoints (Trainer::save_checkpoint) are model files with the training state beside it:
//     global attributes sparsenet_checkpoint_format = 1, checkpoint_optimizer (name),
//     checkpoint_optimizer_steps, checkpoint_epochs_complete, checkpoint_batches_done (int64),
//     checkpoint_loss_sum (double), checkpoint_options (JSON), checkpoint_state_slots (0-2),
//     checkpoint_note_<key> (text);
//     variables weight<i>_state1/_state2 (the matrix's dimensions) and bias<j>_state1/_state2
//     for the optimizer's state slots. Readers of models ignore all of it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sparsenet/config.h"

namespace sparsenet::io {

struct ModelWeight {
    std::string input_layer;
    std::string output_layer;
    uint64_t rows = 0;          // input units
    uint64_t cols = 0;          // output units
    std::vector<float> values;  // [rows, cols]; empty when shared
    // Uses the matrix of source_input_layer -> source_output_layer (transposed or not).
    bool shared = false;
    bool transposed = false;
    std::string source_input_layer;
    std::string source_output_layer;
    // Checkpoints: the optimizer's state slots, [rows, cols] each (empty when the optimizer has
    // fewer slots, and in model files).
    std::vector<float> state1, state2;
};

struct ModelBias {
    std::string layer;
    std::vector<float> values;
    std::vector<float> state1, state2;  // checkpoints, as ModelWeight's
};

// Where training stands in a checkpoint. The random streams (shuffling, dropout, denoising) are
// functions of the seed, the epoch and the rows, so the position is their whole state.
struct ModelTrainingState {
    std::string optimizer;         // to_string(OptimizerKind) of the state slots
    uint64_t optimizer_steps = 0;  // steps taken (the learning-rate decay and Adam's t)
    uint32_t epochs_complete = 0;  // whole epochs done
    uint64_t batches_done = 0;     // batches done of epoch epochs_complete + 1 (0: none)
    double loss_sum = 0.0;         // summed training loss of those batches
    std::string options;           // JSON: the training options a resumed run must match
    std::map<std::string, std::string> notes;  // the caller's (keys: letters, digits, _)
};

struct ModelFile {
    NetworkConfig config;  // N resolved (no "auto")
    std::vector<ModelWeight> weights;
    std::vector<ModelBias> biases;
    std::optional<ModelTrainingState> training;  // checkpoints only
};

// Writes to a uniquely named temporary file next to `path`, fsyncs it, renames it over `path` and
// fsyncs the directory: `path` holds the old model or the new one, never a partial file.
void write_model(const std::string& path, const ModelFile& model);
// Throws Error(kIo) for unreadable / non-model files, naming the path and what is missing.
// A checkpoint's training state (position, options, notes) is read whenever the file has one;
// training_state: also its optimizer slots (Error(kIo) when the file is not a checkpoint).
ModelFile read_model(const std::string& path, bool training_state = false);
// Whether `path` is a model file (has the global attribute sparsenet_model_format) rather than,
// say, a dataset file. Throws Error(kIo) naming the path when it is not a readable netCDF file.
bool is_model_file(const std::string& path);

}  // namespace sparsenet::io
