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
//   Feature names (optional, since issue 23; files without them load as before): for a layer
//     whose units have names (the features index of the dataset it was trained on), the char
//     variable layer<i>_featureNames [layer<i>_featureNamesLength]: the labels of units 0, 1, ...
//     each followed by '\n' (io/names_variable.h). At most the layer's N labels.
//   Checkpoints (Trainer::save_checkpoint) are model files with the training state beside it:
//     global attributes sparsenet_checkpoint_format = 1, checkpoint_optimizer (name),
//     checkpoint_optimizer_steps, checkpoint_epochs_complete, checkpoint_batches_done (int64),
//     checkpoint_loss_sum (double), checkpoint_options (JSON), checkpoint_state_slots (0-2),
//     checkpoint_note_<key> (text);
//     variables weight<i>_state1/_state2 (the matrix's dimensions) and bias<j>_state1/_state2
//     for the optimizer's state slots. Readers of models ignore all of it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/error.h"

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

// Names of a layer's units by layer name (only layers that have them).
using LayerFeatureNames = std::map<std::string, std::vector<std::string>>;

struct ModelFile {
    NetworkConfig config;  // N resolved (no "auto")
    LayerFeatureNames feature_names;
    std::vector<ModelWeight> weights;
    std::vector<ModelBias> biases;
    std::optional<ModelTrainingState> training;  // checkpoints only
};

// Which values of a parameter a variable holds: its own, or an optimizer state slot.
enum class ModelSlot { kValues = 0, kState1 = 1, kState2 = 2 };

// Everything a model file holds but the values: its attributes and the shape of every variable.
// ModelWriter defines a file from it before any value is written; ModelReader reads it (checked
// against the config) before any value is read.
struct ModelLayout {
    struct Weight {
        std::string input_layer;
        std::string output_layer;
        uint64_t rows = 0;    // input units
        uint64_t cols = 0;    // output units
        bool shared = false;  // as ModelWeight: no variable, the owner edge's matrix
        bool transposed = false;
        std::string source_input_layer;
        std::string source_output_layer;
        int state_slots = 0;  // optimizer state variables _state1.. (0 when shared)
    };
    struct Bias {
        std::string layer;
        uint64_t units = 0;
        int state_slots = 0;
    };
    NetworkConfig config;  // N resolved (no "auto")
    LayerFeatureNames feature_names;
    std::vector<Weight> weights;
    std::vector<Bias> biases;
    std::optional<ModelTrainingState> training;  // checkpoints only
};

// A model file written a piece at a time, so that no process needs to hold a whole matrix: the
// constructor creates a uniquely named temporary file next to `path` and defines every attribute
// and variable of the layout; write_rows / write_bias fill the variables in any order; commit()
// flushes the file (fsync), renames it over `path` and flushes the directory, so that `path`
// holds the old model or the new one, never a partial file. Destroyed without a commit (or after
// an error), the temporary file is removed and `path` is left as it was. Errors are Error(kIo)
// (kInternal for a write outside the layout) "cannot save the model to <path> (a previous file
// of that name is left as it was): ...".
class ModelWriter {
  public:
    ModelWriter(const std::string& path, const ModelLayout& layout);
    ~ModelWriter();
    ModelWriter(const ModelWriter&) = delete;
    ModelWriter& operator=(const ModelWriter&) = delete;

    // Rows [first_row, first_row + rows) of unshared weight `weight`'s slot: [rows, cols]
    // row-major at `values`.
    void write_rows(size_t weight, ModelSlot slot, uint64_t first_row, uint64_t rows,
                    const float* values);
    // Bias `bias`'s slot, whole: [units] at `values`.
    void write_bias(size_t bias, ModelSlot slot, const float* values);
    // Every row of every variable must have been written (else Error(kInternal), a bug).
    void commit();

  private:
    struct Variable {
        std::string name;
        int id = -1;
        uint64_t rows = 0;     // rows to write (biases: 1)
        uint64_t cols = 0;     // values per row (biases: units)
        uint64_t written = 0;  // rows written so far
    };
    [[noreturn]] void fail(const Error& error);
    Variable& variable(std::vector<std::array<Variable, 3>>& all, size_t index, ModelSlot slot,
                       const char* kind);
    void define(const ModelLayout& layout);
    void close_and_remove();

    std::string path_;
    std::string tmp_;
    int nc_ = -1;
    bool committed_ = false;
    std::vector<std::array<Variable, 3>> weights_;  // by weight, then ModelSlot
    std::vector<std::array<Variable, 3>> biases_;
};

// Writes `model` whole through a ModelWriter (atomically); Error(kUsage) when a value vector does
// not hold its variable's size.
void write_model(const std::string& path, const ModelFile& model);

// A model file read a piece at a time: the constructor reads the layout and checks that every
// variable it reads has the shape the config gives (Error(kIo) naming the path, the variable and
// the expected shape); the read_* calls read hyperslabs, so a rank of a split network reads only
// its block. A checkpoint's training state (position, options, notes) is read whenever the file
// has one; training_state: its optimizer slots are part of the layout too (Error(kIo) when the
// file is not a checkpoint). Throws Error(kIo) for unreadable / non-model files, naming the path
// and what is missing.
class ModelReader {
  public:
    explicit ModelReader(const std::string& path, bool training_state = false);
    ~ModelReader();
    ModelReader(const ModelReader&) = delete;
    ModelReader& operator=(const ModelReader&) = delete;

    const std::string& path() const { return path_; }
    const ModelLayout& layout() const { return layout_; }
    // Rows [first_row, + rows) x columns [first_col, + cols) of unshared weight `weight`'s slot
    // into `out` ([rows, cols] row-major).
    void read_block(size_t weight, ModelSlot slot, uint64_t first_row, uint64_t rows,
                    uint64_t first_col, uint64_t cols, float* out) const;
    // Units [first, first + count) of bias `bias`'s slot into `out`.
    void read_bias(size_t bias, ModelSlot slot, uint64_t first, uint64_t count, float* out) const;

  private:
    int read_training_state(bool training_state);
    void read_weights(int slots);
    void read_biases(int slots);
    void read_feature_names();
    int find_variable(const std::string& name, const std::vector<uint64_t>& shape,
                      const std::string& whose) const;
    int variable_id(const std::vector<std::array<int, 3>>& all, size_t index, ModelSlot slot,
                    const std::string& name) const;

    std::string path_;
    int nc_ = -1;
    ModelLayout layout_;
    std::vector<std::array<int, 3>> weight_vars_;  // variable ids by weight, then ModelSlot
    std::vector<std::array<int, 3>> bias_vars_;
};

// The whole file through a ModelReader: every value of every variable in the layout.
ModelFile read_model(const std::string& path, bool training_state = false);
// Whether `path` is a model file (has the global attribute sparsenet_model_format) rather than,
// say, a dataset file. Throws Error(kIo) naming the path when it is not a readable netCDF file.
bool is_model_file(const std::string& path);

}  // namespace sparsenet::io
