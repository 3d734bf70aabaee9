// The network's inference part (network_scoring.h).
#include "engine/network_scoring.h"

#include <algorithm>
#include <utility>

#include "engine/network_impl.h"
#include "sparsenet/error.h"

namespace sparsenet::engine {

namespace {

// A split output layer: every rank's top-K of its band (local columns) becomes global columns,
// and the ranks' K * P candidates per row are merged into the top K, on every rank. The order is
// the single-rank one: higher score first, ties to the lower column; empty slots (-inf,
// UINT32_MAX) last.
void merge_split_top_k(const Network::Impl& net, const GraphLayer& layer, size_t count, uint32_t k,
                       const DeviceArray<float>& scores, const DeviceArray<uint32_t>& indices,
                       float* out_scores, uint32_t* out_indices) {
    const size_t block = count * k;
    const size_t ranks = size_t(net.plan.ranks);
    DeviceArray<float> all_scores(*net.backend, ranks * block, "gathered top-K scores");
    DeviceArray<uint32_t> all_indices(*net.backend, ranks * block, "gathered top-K indices");
    net.plan.comm->all_gather(scores.data(), all_scores.data(), block, CommType::kFloat32);
    net.plan.comm->all_gather(indices.data(), all_indices.data(), block, CommType::kUint32);
    std::vector<float> s(ranks * block);
    std::vector<uint32_t> c(ranks * block);
    all_scores.download(s.data(), s.size());
    all_indices.download(c.data(), c.size());
    std::vector<std::pair<float, uint32_t>> candidates;
    for (size_t b = 0; b < count; ++b) {
        candidates.clear();
        for (size_t r = 0; r < ranks; ++r) {
            const uint32_t offset = band_of(layer.n, int(ranks), int(r)).offset;
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

std::vector<LayerView> layer_views(const Network& network) {
    std::vector<LayerView> views;
    const Network::Impl& net = network.impl();
    for (size_t l = 0; l < net.graph.layers.size(); ++l) {
        const GraphLayer& layer = net.graph.layers[l];
        views.push_back({layer.config.name, layer.config.dataset, layer.n, net.plan.layers[l].ld,
                         layer.is_input(), layer.is_output(), layer.config.normalize_l2});
    }
    return views;
}

void forward_into(const Network& network, Backend& be, const std::vector<float*>& act,
                  const Bindings& data, const BatchRows& rows, int skip_layer) {
    network.impl().forward(be, act, data, rows, /*training=*/false, /*mask_seed=*/0, skip_layer);
}

DenseOutputEdge dense_output_edge(const Network& network, int output) {
    const Network::Impl& net = network.impl();
    const GraphLayer& layer = net.graph.layers[size_t(output)];
    DenseOutputEdge e;
    const std::string name = "layer '" + layer.config.name + "'";
    if (layer.in_weights.size() != 1) {
        e.unsupported = name + " has " + std::to_string(layer.in_weights.size()) +
                        " source edges; screening needs exactly one";
    } else if (net.graph.layers[net.graph.edges[layer.in_weights[0]].source].is_input()) {
        e.unsupported = name + " takes the Input layer directly (a sparse product, already cheap)";
    } else if (!layer.skips.empty()) {
        e.unsupported = name + " has Skip sources";
    } else if (!layer.out_weights.empty() || !layer.out_skips.empty()) {
        e.unsupported = "other layers read the activations of " + name;
    } else if (net.plan.split()) {
        e.unsupported = "the network is split across ranks";
    }
    if (!e.unsupported.empty()) return e;
    const GraphEdge& edge = net.graph.edges[layer.in_weights[0]];
    e.source = edge.source;
    e.k = edge.rows;
    e.n = edge.cols;
    e.stored = net.params.edges[edge.owner].w.data();
    if (net.params.released_output == output) {
        e.stored = nullptr;
        e.released_fingerprint = net.params.released_fingerprint;
    }
    e.ld = net.plan.edges[edge.owner].ld;
    e.transposed = edge.transposed;
    e.bias = net.params.layers[size_t(output)].bias.data();
    e.activation = layer.activation;
    if (layer.activation.kind == Activation::kSoftMax) {
        e.logits = true;
        e.activation = formulas::ActivationParams{};
        e.activation.kind = Activation::kLinear;
    }
    e.weight_name = net.weight_name(edge);
    return e;
}

size_t release_output_matrix(Network& network, int output) {
    Network::Impl& net = network.impl();
    const GraphLayer& layer = net.graph.layers[size_t(output)];
    if (layer.in_weights.size() != 1) return 0;
    const GraphEdge& edge = net.graph.edges[layer.in_weights[0]];
    if (edge.owner != layer.in_weights[0] || net.graph.edges[size_t(edge.owner)].users != 1)
        return 0;
    EdgeParams& params = net.params.edges[size_t(edge.owner)];
    // The layer's bias too: the ranking reads its own copy, and the network never runs the layer.
    LayerParams& bias = net.params.layers[size_t(output)];
    // A matrix a streamed load never kept (LoadOptions::release_output) counts as released.
    const size_t never_kept =
        params.kept == Kept::kNothing ? net.plan.edges[size_t(edge.owner)].elements() : 0;
    const size_t bytes =
        (params.w.size() + never_kept) * sizeof(float) + params.w_bf16.size() * sizeof(uint16_t) +
        (bias.bias.size() + bias.bias_state1.size() + bias.bias_state2.size()) * sizeof(float);
    params.w = DeviceArray<float>();
    params.w_bf16 = DeviceArray<uint16_t>();
    bias.bias = DeviceArray<float>();
    bias.bias_state1 = DeviceArray<float>();
    bias.bias_state2 = DeviceArray<float>();
    return bytes;
}

int Scoring::layer(const std::string& name) const {
    for (size_t l = 0; l < net_.graph.layers.size(); ++l) {
        const GraphLayer& layer = net_.graph.layers[l];
        if (name.empty() ? !layer.is_output() : layer.config.name != name) continue;
        if (layer.is_input()) {
            throw Error(ErrorCategory::kUsage, "layer '" + name + "' is an Input layer");
        }
        return static_cast<int>(l);
    }
    throw Error(ErrorCategory::kUsage, name.empty() ? "the network has no Output layer"
                                                    : "the network has no layer '" + name + "'");
}

LayerUnits Scoring::units(int l) const {
    const GraphLayer& layer = net_.graph.layers[size_t(l)];
    const LayerBand& band = net_.plan.layers[size_t(l)];
    return {layer.config.name, layer.n, band.offset, band.n_local};
}

Backend& Scoring::backend() const {
    return *net_.backend;
}

bool Scoring::split() const {
    return net_.plan.split();
}

bool Scoring::fuses_activation(int l) const {
    const GraphLayer& layer = net_.graph.layers[size_t(l)];
    if (net_.plan.split() || !layer.is_output()) return false;
    if (layer.activation.kind == Activation::kSoftMax) return false;
    for (const GraphEdge& e : net_.graph.edges)
        if (net_.graph.layers[e.source].is_output()) return false;
    for (int s : net_.graph.order)
        for (int k : net_.graph.layers[s].skips)
            if (net_.graph.layers[k].is_output()) return false;
    return true;
}

void Scoring::forward(const Bindings& data, const BatchRows& rows, bool defer_output_activation) {
    net_.ensure_batch_capacity(rows.batch);
    if (!defer_output_activation) {
        net_.forward(data, rows, /*training=*/false, /*mask_seed=*/0);
        return;
    }
    // Network::Impl::forward's inference pass (catch-up, then the layers), with the Output
    // layers' bias and activation left to top_k.
    net_.catch_up_all();
    std::vector<float*> act(net_.graph.layers.size(), nullptr);
    std::vector<uint16_t*> act_bf16(act.size(), nullptr);  // the hidden layers' BF16 copies
    for (size_t l = 0; l < act.size(); ++l) {
        act[l] = net_.buffers.layers[l].act.data();
        act_bf16[l] = net_.act_copy(int(l));
    }
    net_.forward(*net_.backend, act, data, rows, /*training=*/false, /*mask_seed=*/0,
                 /*skip_layer=*/-1, /*defer_output_activation=*/true, &act_bf16);
}

std::vector<float> Scoring::scores(int l, size_t count) const {
    const GraphLayer& layer = net_.graph.layers[size_t(l)];
    std::vector<float> out(count * layer.n);
    if (out.empty()) return out;
    if (!net_.plan.split()) {
        net_.download_rows(net_.buffers.layers[size_t(l)].act, net_.plan.layers[size_t(l)].ld, 0,
                           count, layer.n, out.data());
        return out;
    }
    // Every rank's band of the rows ([count, band] blocks of count * cap floats, packed: padded
    // rows are repacked first), gathered into whole rows.
    const LayerBand& band = net_.plan.layers[size_t(l)];
    const size_t block = count * band.cap;
    DeviceArray<float> all(*net_.backend, block * net_.plan.ranks, "gathered scores");
    const float* send = net_.buffers.layers[size_t(l)].act.data();
    DeviceArray<float> packed;
    if (band.ld != band.n_local) {
        packed = DeviceArray<float>(*net_.backend, std::max<size_t>(block, 1), "packed scores");
        net_.backend->add_matrix(1.0f, ConstMatrixView(send, count, band.n_local, band.ld), 0.0f,
                                 MatrixView{packed.data(), count, band.n_local, band.n_local});
        send = packed.data();
    }
    net_.plan.comm->all_gather(send, all.data(), block, CommType::kFloat32);
    std::vector<float> blocks(block * net_.plan.ranks);
    all.download(blocks.data(), blocks.size());
    for (int r = 0; r < net_.plan.ranks; ++r) {
        const Band b = band_of(layer.n, net_.plan.ranks, r);
        for (size_t i = 0; i < count; ++i) {
            const float* from = blocks.data() + r * block + i * b.count;
            std::copy(from, from + b.count, out.begin() + i * layer.n + b.offset);
        }
    }
    return out;
}

void Scoring::top_k(int l, size_t count, const CsrBatchView* exclude, uint32_t k, float* out_scores,
                    uint32_t* out_indices, bool activation_pending) const {
    const GraphLayer& layer = net_.graph.layers[size_t(l)];
    if (top_scores_.size() < count * k) {
        top_scores_ = DeviceArray<float>(*net_.backend, count * k, "top-K scores");
        top_indices_ = DeviceArray<uint32_t>(*net_.backend, count * k, "top-K indices");
    }
    const LayerBand& band = net_.plan.layers[size_t(l)];
    const TopKActivation activation{layer.activation, net_.params.layers[size_t(l)].bias.data()};
    net_.backend->top_k(
        ConstMatrixView(net_.buffers.layers[size_t(l)].act.data(), count, band.n_local, band.ld),
        exclude, k, top_scores_.data(), top_indices_.data(),
        activation_pending ? &activation : nullptr);
    if (net_.plan.split()) {
        merge_split_top_k(net_, layer, count, k, top_scores_, top_indices_, out_scores,
                          out_indices);
        return;
    }
    top_scores_.download(out_scores, count * k);
    top_indices_.download(out_indices, count * k);
}

}  // namespace sparsenet::engine
