// Network: a trained or trainable model (config + weights) living on one backend.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sparsenet/config.h"

namespace sparsenet {

struct NetworkOptions {
    std::string device = "auto";  // "auto" | "cpu" | "cuda[:N]"
    int threads = 0;              // CPU threads; 0 = all cores
    uint64_t seed = 12134;        // weight initialisation (DSSTNE's fixed seed by default)
};

// A named parameter tensor, row-major.
struct Parameter {
    std::string name;  // "weight:<source>-><layer>" ([in, out]) or "bias:<layer>" ([1, n])
    uint64_t rows = 0;
    uint64_t cols = 0;
};

class Network {
  public:
    // Builds the network. dataset_widths maps dataset names to their column counts; it resolves
    // "N": "auto" and checks every explicit N against its dataset. Weights are initialised from
    // options.seed as the config's WeightInit says.
    static Network create(const NetworkConfig& config,
                          const std::map<std::string, uint32_t>& dataset_widths,
                          const NetworkOptions& options = {});

    // Loads a model file written by save(); nothing else is needed to predict.
    static Network load(const std::string& path, const NetworkOptions& options = {});

    // Writes config + weights + biases to a netCDF model file, atomically: a temporary file in
    // the same directory, flushed to disk (fsync), renamed over `path`, and the directory flushed.
    // A process reading `path` meanwhile sees the old model or the new one; when saving fails
    // (Error kIo naming `path`) the old file is untouched and no temporary file remains.
    void save(const std::string& path) const;

    const NetworkConfig& config() const;  // with every "auto" resolved
    std::string device() const;           // the backend's name, e.g. "cpu"
    uint32_t layer_size(const std::string& layer) const;

    std::vector<Parameter> parameters() const;
    std::vector<float> get_parameter(const std::string& name) const;
    void set_parameter(const std::string& name, const std::vector<float>& values);

    Network(Network&&) noexcept;
    Network& operator=(Network&&) noexcept;
    ~Network();

    struct Impl;
    Impl& impl() { return *impl_; }
    const Impl& impl() const { return *impl_; }

  private:
    explicit Network(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace sparsenet
