// What a model or checkpoint file holds, without reading its values: the network, every weight
// matrix and bias with its shape, which layers carry feature names, and where training stands in
// a checkpoint. For tools and services that list or check models before loading one (the CLI's
// `info`); loading a model to use it is Network::load (network.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sparsenet/config.h"

namespace sparsenet {

struct ModelInfo {
    NetworkConfig config;  // N resolved (no "auto")

    struct Weight {
        std::string from;   // input layer
        std::string to;     // output layer
        uint64_t rows = 0;  // input units
        uint64_t cols = 0;  // output units
        // Uses another edge's matrix (SharedWeights): no parameters of its own.
        bool shared = false;
        bool transposed = false;
        std::string shares_from;  // the owner edge, when shared
        std::string shares_to;
    };
    struct Bias {
        std::string layer;
        uint64_t units = 0;
    };
    std::vector<Weight> weights;
    std::vector<Bias> biases;
    uint64_t parameters = 0;  // unshared weights and biases

    // Layers whose units have names (the index of the dataset they were trained on): how many.
    std::map<std::string, uint64_t> feature_names;

    // Checkpoints only (Trainer::save_checkpoint, train --checkpoint).
    struct Checkpoint {
        uint32_t epochs_complete = 0;  // whole epochs done
        uint64_t batches_done = 0;     // batches done of the next epoch (0: none)
        std::string optimizer;         // the optimizer whose state the file holds
        uint64_t optimizer_steps = 0;
        std::string options;  // JSON: the training options a resumed run must match
    };
    std::optional<Checkpoint> checkpoint;
};

// True when `path` is a sparsenet model or checkpoint file (a netCDF file with the attribute
// sparsenet_model_format), false for another netCDF file (a dataset); Error(kIo) naming the path
// when it is missing or not a readable netCDF file.
bool is_model_file(const std::string& path);

// Reads the description of a model file (Error(kIo) naming the file when it is missing, not a
// model, of an unsupported format or inconsistent with its own config; Error(kConfig) for a bad
// config). Reads no weight values, so it is quick for any model size.
ModelInfo read_model_info(const std::string& path);

}  // namespace sparsenet
