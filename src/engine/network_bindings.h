// Uploads the datasets that a network's Input/Output layers name, once, and binds them to layers
// (the network's part that the passes read: Bindings; Network::Impl stays incomplete here).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/device_dataset.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"

namespace sparsenet::engine {

// Datasets bound to input and output layers for one pass (training or inference).
struct Bindings {
    std::vector<const DeviceDataset*> layer_data;  // by layer index; null for hidden layers
};

// Indexed datasets (Dataset::example_rows) are uploaded expanded, one CSR row per example, so
// the passes need no indirection. Memory cost: the expanded CSR in backend memory (device memory
// on CUDA) for the life of the BoundData, instead of the stored rows only, plus a temporary host
// copy of the same size while uploading; an index shared by many examples multiplies the size.
// Per-example weights (Dataset::weights) travel with the dataset; only the loss reads them
// (on Output layers, as DSSTNE), so they change nothing on Input datasets.
class BoundData {
  public:
    // with_outputs: bind Output layers too (training); otherwise only Input layers.
    BoundData(Network::Impl& net, const std::map<std::string, const Dataset*>& datasets,
              bool with_outputs);

    const Bindings& bindings() const { return bindings_; }
    uint64_t rows() const { return rows_; }  // examples (expanded rows)
    // Largest number of stored entries in any `batch` rows of any bound input dataset.
    size_t max_input_nnz(size_t batch) const;
    // The upload of host dataset `data` as it is (neither L2-normalised nor a column band), or
    // null: predict's exclusion of the row's own inputs reads it instead of a second upload.
    const DeviceDataset* uploaded(const Dataset* data) const;

  private:
    // Split networks: binds layer l to this rank's column band of `data`.
    void bind_band(Network::Impl& net, int l, const Dataset& data);
    static std::vector<uint64_t> sorted_lengths(const Dataset& data);
    // Error(kData) naming the dataset, row and column unless every row of an Output layer's
    // dataset holds strictly increasing columns (output_delta's contract, backend.h).
    static void check_target_rows(const Dataset& data, const std::string& name,
                                  const std::string& layer);
    // The element-wise sum of `v` over the ranks of the network's communicator.
    static void all_reduce_doubles(Network::Impl& net, std::vector<double>& v);

    Bindings bindings_;
    std::map<std::string, std::unique_ptr<DeviceDataset>> uploaded_;
    std::map<const Dataset*, const DeviceDataset*> as_given_;     // uploaded() by host dataset
    std::map<std::string, std::vector<uint64_t>> input_lengths_;  // sorted descending
    uint64_t rows_ = 0;
};

}  // namespace sparsenet::engine
