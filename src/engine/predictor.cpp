// Predictor: inference-mode forward passes and per-row top-K with exclusion.
#include "sparsenet/predictor.h"

#include <algorithm>

#include "engine/network_bindings.h"
#include "engine/network_impl.h"
#include "sparsenet/error.h"

namespace sparsenet {

namespace {

// A split output layer: every rank's top-K of its band (local columns) becomes global columns,
// and the ranks' K * P candidates per row are merged into the top K, on every rank. The order is
// the single-rank one: higher score first, ties to the lower column; empty slots (-inf,
// UINT32_MAX) last.
void merge_split_top_k(Network::Impl& net, const engine::Layer& layer, size_t count, uint32_t k,
                       DeviceArray<float>& scores, DeviceArray<uint32_t>& indices,
                       float* out_scores, uint32_t* out_indices) {
    const size_t block = count * k;
    const size_t ranks = size_t(net.ranks);
    DeviceArray<float> all_scores(*net.backend, ranks * block, "gathered top-K scores");
    DeviceArray<uint32_t> all_indices(*net.backend, ranks * block, "gathered top-K indices");
    net.comm->all_gather(scores.data(), all_scores.data(), block, CommType::kFloat32);
    net.comm->all_gather(indices.data(), all_indices.data(), block, CommType::kUint32);
    std::vector<float> s(ranks * block);
    std::vector<uint32_t> c(ranks * block);
    all_scores.download(s.data(), s.size());
    all_indices.download(c.data(), c.size());
    std::vector<std::pair<float, uint32_t>> candidates;
    for (size_t b = 0; b < count; ++b) {
        candidates.clear();
        for (size_t r = 0; r < ranks; ++r) {
            const uint32_t offset = engine::band_of(layer.n, int(ranks), int(r)).offset;
            for (size_t i = 0; i < k; ++i) {
                const size_t at = r * block + b * k + i;
                const uint32_t column = c[at] == UINT32_MAX ? UINT32_MAX : c[at] + offset;
                candidates.emplace_back(s[at], column);
            }
        }
        std::partial_sort(
            candidates.begin(), candidates.begin() + k, candidates.end(),
            [](const std::pair<float, uint32_t>& x, const std::pair<float, uint32_t>& y) {
                return x.first > y.first || (x.first == y.first && x.second < y.second);
            });
        for (size_t i = 0; i < k; ++i) {
            out_scores[b * k + i] = candidates[i].first;
            out_indices[b * k + i] = candidates[i].second;
        }
    }
}

}  // namespace

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
    Network::Impl& net = impl_->net;
    const engine::Layer& layer = net.layers[l];
    std::vector<float> out(size_t(count) * layer.n);
    if (out.empty()) return out;
    if (!net.split()) {
        net.backend->download(out.data(), layer.act.data(), out.size() * sizeof(float));
        return out;
    }
    // Every rank's band of the rows ([count, band] blocks of count * cap floats), gathered into
    // whole rows.
    const size_t block = size_t(count) * layer.cap;
    DeviceArray<float> all(*net.backend, block * net.ranks, "gathered scores");
    net.comm->all_gather(layer.act.data(), all.data(), block, CommType::kFloat32);
    std::vector<float> blocks(block * net.ranks);
    all.download(blocks.data(), blocks.size());
    for (int r = 0; r < net.ranks; ++r) {
        const engine::Band b = engine::band_of(layer.n, net.ranks, r);
        for (size_t i = 0; i < count; ++i) {
            const float* from = blocks.data() + r * block + i * b.count;
            std::copy(from, from + b.count, out.begin() + i * layer.n + b.offset);
        }
    }
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
        if (p.net.split()) {  // this rank's columns of the exclusion, as its band of scores
            const uint32_t first = std::min(layer.offset, exclude->cols);
            const uint32_t last = std::min(layer.offset + layer.n_local, exclude->cols);
            excluded = std::make_unique<engine::DeviceDataset>(
                *p.net.backend, column_band(*exclude, first, last), first);
        } else {
            excluded = std::make_unique<engine::DeviceDataset>(*p.net.backend, *exclude);
        }
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
        p.net.backend->top_k(ConstMatrixView(layer.act.data(), count, layer.n_local, layer.n_local),
                             excluded ? &ex : nullptr, options.k, top_scores.data(),
                             top_indices.data());
        if (p.net.split()) {
            merge_split_top_k(p.net, layer, count, options.k, top_scores, top_indices,
                              result.scores.data() + first * options.k,
                              result.indices.data() + first * options.k);
            continue;
        }
        top_scores.download(result.scores.data() + first * options.k, count * options.k);
        top_indices.download(result.indices.data() + first * options.k, count * options.k);
    }
    return result;
}

}  // namespace sparsenet
