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
#pragma once

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
};

struct ModelBias {
    std::string layer;
    std::vector<float> values;
};

struct ModelFile {
    NetworkConfig config;  // N resolved (no "auto")
    std::vector<ModelWeight> weights;
    std::vector<ModelBias> biases;
};

// Writes to a uniquely named temporary file next to `path`, fsyncs it, renames it over `path` and
// fsyncs the directory: `path` holds the old model or the new one, never a partial file.
void write_model(const std::string& path, const ModelFile& model);
// Throws Error(kIo) for unreadable / non-model files, naming the path and what is missing.
ModelFile read_model(const std::string& path);
// Whether `path` is a model file (has the global attribute sparsenet_model_format) rather than,
// say, a dataset file. Throws Error(kIo) naming the path when it is not a readable netCDF file.
bool is_model_file(const std::string& path);

}  // namespace sparsenet::io
