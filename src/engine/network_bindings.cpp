#include "engine/network_bindings.h"

#include <algorithm>
#include <functional>

#include "engine/input_norm.h"
#include "engine/network_impl.h"
#include "sparsenet/error.h"

namespace sparsenet::engine {

BoundData::BoundData(Network::Impl& net, const std::map<std::string, const Dataset*>& datasets,
                     bool with_outputs) {
    bindings_.layer_data.assign(net.graph.layers.size(), nullptr);
    std::string first_name;
    for (size_t l = 0; l < net.graph.layers.size(); ++l) {
        const GraphLayer& layer = net.graph.layers[l];
        if (!layer.is_input() && !(with_outputs && layer.is_output())) continue;
        const std::string& name = layer.config.dataset;
        auto it = datasets.find(name);
        if (it == datasets.end() || it->second == nullptr) {
            std::string given;
            for (const auto& kv : datasets) given += (given.empty() ? "" : ", ") + kv.first;
            throw Error(ErrorCategory::kData,
                        "layer '" + layer.config.name + "' needs dataset '" + name +
                            "'; datasets given: " + (given.empty() ? "(none)" : given));
        }
        const Dataset& data = *it->second;
        if (data.cols > layer.n) {
            throw Error(ErrorCategory::kData,
                        "dataset '" + name + "' has " + std::to_string(data.cols) +
                            " columns but layer '" + layer.config.name + "' has " +
                            std::to_string(layer.n) + " units; expected at most " +
                            std::to_string(layer.n) + " columns");
        }
        const uint64_t examples = data.examples();
        if (first_name.empty()) {
            first_name = name;
            rows_ = examples;
        } else if (examples != rows_) {
            throw Error(
                ErrorCategory::kData,
                "datasets '" + first_name + "' and '" + name + "' have " + std::to_string(rows_) +
                    " and " + std::to_string(examples) +
                    " example rows; every dataset of a network must have the same examples");
        }
        if (examples > UINT32_MAX) {
            throw Error(ErrorCategory::kData, "dataset '" + name + "' has more than 2^32 examples");
        }
        if (layer.is_output()) check_target_rows(data, name, layer.config.name);
        if (net.plan.split()) {
            bind_band(net, static_cast<int>(l), data);
            continue;
        }
        const float norm = layer.is_input() ? layer.config.normalize_l2 : 0.0f;
        const std::string key = norm > 0.0f ? name + "#l2=" + std::to_string(norm) : name;
        auto& slot = uploaded_[key];
        if (!slot && norm > 0.0f) {
            Dataset scaled = data.expanded();
            normalize_rows(scaled, row_square_sums(scaled), norm);
            slot = std::make_unique<DeviceDataset>(*net.backend, scaled);
        } else if (!slot && data.is_indexed()) {
            // Uploaded expanded (one row per example); the host copy lives only until then.
            slot = std::make_unique<DeviceDataset>(*net.backend, data.expanded());
        } else if (!slot) {
            slot = std::make_unique<DeviceDataset>(*net.backend, data);
        }
        bindings_.layer_data[l] = slot.get();
        if (norm == 0.0f) as_given_[&data] = slot.get();
        if (layer.is_input() && !input_lengths_.count(key)) {
            input_lengths_[key] = sorted_lengths(data);
        }
    }
}

// output_delta overwrites the delta at each stored target and adds its loss, so a row holding a
// column twice has no defined result (on a GPU two threads would race on it). Datasets read from
// files were checked by the reader; one built in memory is checked here, once per Trainer:
// O(stored entries), against the whole training run.
void BoundData::check_target_rows(const Dataset& data, const std::string& name,
                                  const std::string& layer) {
    const uint64_t rows = data.offsets.size() - 1;
    for (uint64_t r = 0; r < rows; ++r) {
        for (uint64_t k = data.offsets[r] + 1; k < data.offsets[r + 1]; ++k) {
            if (data.indices[k] > data.indices[k - 1]) continue;
            throw Error(ErrorCategory::kData,
                        "dataset '" + name + "' (targets of output layer '" + layer + "'): row " +
                            std::to_string(r) + ": " +
                            (data.indices[k] == data.indices[k - 1] ? "duplicate column "
                                                                    : "column out of order ") +
                            std::to_string(data.indices[k]) +
                            "; target rows must hold each column once, in increasing order (merge "
                            "repeated interactions, as `sparsenet convert` does)");
        }
    }
}

std::vector<uint64_t> BoundData::sorted_lengths(const Dataset& data) {
    std::vector<uint64_t> lengths(data.examples());
    for (uint64_t e = 0; e < lengths.size(); ++e) {
        lengths[e] = data.row_length(data.is_indexed() ? data.example_rows[e] : e);
    }
    std::sort(lengths.begin(), lengths.end(), std::greater<uint64_t>());
    return lengths;
}

void BoundData::all_reduce_doubles(Network::Impl& net, std::vector<double>& v) {
    DeviceArray<double> reduced(*net.backend, std::max<size_t>(v.size(), 1), "row sums");
    if (!v.empty()) reduced.upload(v.data(), v.size());
    net.plan.comm->all_reduce(reduced.data(), v.size(), CommType::kFloat64, CommOp::kSum);
    if (!v.empty()) reduced.download(v.data(), v.size());
}

void BoundData::bind_band(Network::Impl& net, int l, const Dataset& data) {
    const GraphLayer& layer = net.graph.layers[l];
    const LayerBand& units = net.plan.layers[l];
    // Every rank binds the columns of its band of the layer (a dataset narrower than the layer
    // may leave a band empty).
    const uint32_t first = std::min(units.offset, data.cols);
    const uint32_t last = std::min(units.offset + units.n_local, data.cols);
    const std::string key = layer.config.dataset + "#" + std::to_string(units.offset);
    Dataset band = column_band(data.is_indexed() ? data.expanded() : data, first, last);
    // Normalize: each row scaled by the whole row's norm, from the ranks' band sums of squares.
    const float norm = layer.is_input() ? layer.config.normalize_l2 : 0.0f;
    if (norm > 0.0f) {
        std::vector<double> squares = row_square_sums(band);
        all_reduce_doubles(net, squares);
        normalize_rows(band, squares, norm);
    }
    // Multinomial cross-entropy on a split SoftMax needs each whole target row's sum: the
    // ranks' band sums, added in double.
    std::vector<float> totals;
    const bool multinomial = layer.is_output() && layer.config.activation == Activation::kSoftMax &&
                             net.graph.config.error_function == ErrorFunction::kCrossEntropy;
    if (multinomial) {
        std::vector<double> sums(band.rows, 0.0);
        for (uint64_t r = 0; r < band.rows; ++r) {
            for (uint64_t e = band.offsets[r]; e < band.offsets[r + 1]; ++e) {
                sums[r] += band.is_boolean() ? 1.0 : double(band.values[e]);
            }
        }
        all_reduce_doubles(net, sums);
        totals.assign(sums.begin(), sums.end());
    }
    auto& slot = uploaded_[norm > 0.0f ? key + "#l2=" + std::to_string(norm) : key];
    if (!slot || multinomial) {
        slot = std::make_unique<DeviceDataset>(*net.backend, band, first, totals);
    }
    bindings_.layer_data[l] = slot.get();
    if (layer.is_input() && !input_lengths_.count(key)) input_lengths_[key] = sorted_lengths(band);
}

size_t BoundData::max_input_nnz(size_t batch) const {
    size_t most = 1;
    for (const auto& kv : input_lengths_) {
        size_t sum = 0;
        for (size_t i = 0; i < std::min(batch, kv.second.size()); ++i) sum += kv.second[i];
        most = std::max(most, sum);
    }
    return most;
}

const DeviceDataset* BoundData::uploaded(const Dataset* data) const {
    const auto it = as_given_.find(data);
    return it == as_given_.end() ? nullptr : it->second;
}

}  // namespace sparsenet::engine
