// Predictor: inference-mode forward passes and per-row top-K with exclusion.
#include "sparsenet/predictor.h"

#include <algorithm>

#include "engine/bindings.h"
#include "engine/network_impl.h"
#include "sparsenet/error.h"

namespace sparsenet {

struct Predictor::Impl {
    Network::Impl& net;
    engine::BoundData data;

    Impl(Network& network, const std::map<std::string, const Dataset*>& inputs)
        : net(network.impl()), data(network.impl(), inputs, /*with_outputs=*/false) {}

    // The layer to read: `name` (any non-input layer), or by default the first Output layer in
    // the config's order (DSSTNE's predict reads the layer named "Output").
    int output_layer(const std::string& name) const {
        for (size_t l = 0; l < net.layers.size(); ++l) {
            const engine::Layer& layer = net.layers[l];
            if (name.empty() ? !layer.is_output() : layer.config.name != name) continue;
            if (layer.is_input()) {
                throw Error(ErrorCategory::kUsage, "layer '" + name + "' is an Input layer");
            }
            return static_cast<int>(l);
        }
        throw Error(ErrorCategory::kUsage, name.empty()
                                               ? "the network has no Output layer"
                                               : "the network has no layer '" + name + "'");
    }

    void forward(uint64_t first_row, size_t count) {
        if (first_row + count > data.rows()) {
            throw Error(ErrorCategory::kUsage, "rows out of range");
        }
        net.ensure_batch_capacity(count);
        net.forward(data.bindings(), BatchRows{nullptr, first_row, count}, false, 0);
    }
};

Predictor::Predictor(Network& network, const std::map<std::string, const Dataset*>& inputs)
    : impl_(std::make_unique<Impl>(network, inputs)) {}

Predictor::~Predictor() = default;

uint64_t Predictor::rows() const {
    return impl_->data.rows();
}

std::vector<float> Predictor::scores(uint64_t first_row, uint32_t count,
                                     const std::string& output_layer) {
    const int l = impl_->output_layer(output_layer);
    impl_->forward(first_row, count);
    const engine::Layer& layer = impl_->net.layers[l];
    std::vector<float> out(size_t(count) * layer.n);
    if (!out.empty()) impl_->net.backend->download(out.data(), layer.act.data(), out.size() * 4);
    return out;
}

TopK Predictor::top_k(const PredictOptions& options, const Dataset* exclude) {
    Impl& p = *impl_;
    const int l = p.output_layer(options.output_layer);
    const engine::Layer& layer = p.net.layers[l];
    if (options.k == 0) throw Error(ErrorCategory::kUsage, "k must be positive");
    if (options.batch == 0) throw Error(ErrorCategory::kUsage, "batch size must be positive");
    std::unique_ptr<engine::DeviceDataset> excluded;
    Dataset expanded_exclude;
    if (exclude != nullptr && exclude->is_indexed()) {
        expanded_exclude = exclude->expanded();
        exclude = &expanded_exclude;
    }
    if (exclude != nullptr) {
        if (exclude->rows != p.data.rows()) {
            throw Error(ErrorCategory::kData, "the exclusion dataset '" + exclude->name + "' has " +
                                                  std::to_string(exclude->rows) +
                                                  " rows; the inputs have " +
                                                  std::to_string(p.data.rows()));
        }
        if (exclude->cols > layer.n) {
            throw Error(ErrorCategory::kData, "the exclusion dataset '" + exclude->name + "' has " +
                                                  std::to_string(exclude->cols) +
                                                  " columns; layer '" + layer.config.name +
                                                  "' has " + std::to_string(layer.n) + " units");
        }
        excluded = std::make_unique<engine::DeviceDataset>(*p.net.backend, *exclude);
    }
    TopK result;
    result.rows = p.data.rows();
    result.k = options.k;
    result.scores.resize(result.rows * options.k);
    result.indices.resize(result.rows * options.k);
    const size_t step = std::min<uint64_t>(options.batch, std::max<uint64_t>(1, result.rows));
    DeviceArray<float> top_scores(*p.net.backend, step * options.k, "top-K scores");
    DeviceArray<uint32_t> top_indices(*p.net.backend, step * options.k, "top-K indices");
    for (uint64_t first = 0; first < result.rows; first += step) {
        const size_t count = std::min<uint64_t>(step, result.rows - first);
        p.forward(first, count);
        CsrBatchView ex;
        if (excluded) ex = excluded->view(BatchRows{nullptr, first, count});
        p.net.backend->top_k(ConstMatrixView(layer.act.data(), count, layer.n, layer.n),
                             excluded ? &ex : nullptr, options.k, top_scores.data(),
                             top_indices.data());
        top_scores.download(result.scores.data() + first * options.k, count * options.k);
        top_indices.download(result.indices.data() + first * options.k, count * options.k);
    }
    return result;
}

}  // namespace sparsenet
