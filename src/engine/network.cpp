// Network construction, parameters, save and load.
#include <algorithm>
#include <cmath>
#include <set>

#include "engine/host_rng.h"
#include "engine/network_impl.h"
#include "io/model_file.h"
#include "sparsenet/error.h"

namespace sparsenet {

using engine::Layer;
using engine::Weight;

namespace {

std::string join_names(const std::map<std::string, uint32_t>& m) {
    std::string s;
    for (const auto& kv : m) s += (s.empty() ? "" : ", ") + kv.first;
    return s.empty() ? "(none)" : s;
}

std::string layer_path(size_t i) {
    return "$.Layers[" + std::to_string(i) + "]";
}

}  // namespace

void Network::Impl::build(const std::map<std::string, uint32_t>& dataset_widths) {
    const std::string& where = config.name.empty() ? std::string("network") : config.name;
    layers.clear();
    weights.clear();
    layers.resize(config.layers.size());
    for (size_t i = 0; i < config.layers.size(); ++i) {
        LayerConfig& lc = config.layers[i];
        layer_index[lc.name] = static_cast<int>(i);
        if (lc.kind != LayerKind::kHidden) {
            auto it = dataset_widths.find(lc.dataset);
            if (it == dataset_widths.end()) {
                throw Error(ErrorCategory::kData,
                            where + ": " + layer_path(i) + ".DataSet: dataset '" + lc.dataset +
                                "' of layer '" + lc.name +
                                "' was not given; datasets given: " + join_names(dataset_widths));
            }
            if (lc.n_auto) {
                lc.n = it->second;
                lc.n_auto = false;
            } else if (it->second > lc.n) {
                throw Error(ErrorCategory::kData,
                            where + ": " + layer_path(i) + ".N: layer '" + lc.name +
                                "' has N = " + std::to_string(lc.n) + " but its dataset '" +
                                lc.dataset + "' has " + std::to_string(it->second) +
                                " columns; expected N >= the dataset width");
            }
        }
        if (lc.n == 0) {
            throw Error(ErrorCategory::kConfig,
                        where + ": " + layer_path(i) + ".N: layer '" + lc.name + "' has no size");
        }
        if (lc.kind != LayerKind::kInput && lc.activation == Activation::kSoftMax &&
            lc.kind != LayerKind::kOutput) {
            throw Error(ErrorCategory::kNotImplemented,
                        where + ": " + layer_path(i) +
                            ".Activation: not implemented yet: SoftMax on a Hidden layer");
        }
        layers[i].config = lc;
        layers[i].n = lc.n;
        layers[i].activation.kind = lc.activation;
        layers[i].activation.slope = lc.relu_slope;
        layers[i].activation.alpha = lc.elu_alpha;
        layers[i].activation.lambda = lc.selu_lambda;
    }
    // One weight matrix per (source -> layer) edge.
    for (size_t i = 0; i < config.layers.size(); ++i) {
        for (const std::string& src_name : config.layers[i].sources) {
            auto it = layer_index.find(src_name);
            if (it == layer_index.end()) {
                throw Error(
                    ErrorCategory::kConfig,
                    where + ": " + layer_path(i) + ".Source: unknown layer '" + src_name + "'");
            }
            const int s = it->second;
            if (layers[s].is_output()) {
                throw Error(ErrorCategory::kNotImplemented,
                            where + ": " + layer_path(i) +
                                ".Source: not implemented yet: an Output layer ('" + src_name +
                                "') as a Source");
            }
            Weight w;
            w.source = s;
            w.destination = static_cast<int>(i);
            w.rows = layers[s].n;
            w.cols = layers[i].n;
            w.sparse_source = layers[s].is_input();
            layers[s].out_weights.push_back(static_cast<int>(weights.size()));
            layers[i].in_weights.push_back(static_cast<int>(weights.size()));
            weights.push_back(std::move(w));
        }
    }
    // Topological order (Kahn), stable by position in the config.
    std::vector<int> pending(layers.size(), 0);
    for (const Weight& w : weights) pending[w.destination]++;
    order.clear();
    std::set<int> ready;
    for (size_t i = 0; i < layers.size(); ++i) {
        if (pending[i] == 0) ready.insert(static_cast<int>(i));
    }
    while (!ready.empty()) {
        const int l = *ready.begin();
        ready.erase(ready.begin());
        order.push_back(l);
        for (int wi : layers[l].out_weights) {
            if (--pending[weights[wi].destination] == 0) ready.insert(weights[wi].destination);
        }
    }
    if (order.size() != layers.size()) {
        throw Error(ErrorCategory::kConfig, where + ": $.Layers: the Source links form a cycle");
    }
    // Which layers' deltas matter: those with a path to an output layer.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Layer& layer = layers[*it];
        if (layer.is_output()) layer.reaches_output = true;
        for (int wi : layer.out_weights) {
            if (layers[weights[wi].destination].reaches_output) layer.reaches_output = true;
        }
    }
    // Capability check before anything runs.
    for (const Layer& layer : layers) {
        if (!layer.is_output()) continue;
        std::string why;
        if (!backend->supports(Op::kOutputDelta, layer.config.activation, config.error_function,
                               &why)) {
            throw Error(ErrorCategory::kNotImplemented, where + ": layer '" + layer.config.name +
                                                            "' cannot run on " + backend->name() +
                                                            ": " + why);
        }
    }
    for (Weight& w : weights) {
        w.w = DeviceArray<float>(*backend, size_t(w.rows) * w.cols, "weights");
    }
    for (Layer& layer : layers) {
        if (layer.is_input()) continue;
        layer.bias = DeviceArray<float>(*backend, layer.n, "biases");
        layer.bias_grad = DeviceArray<float>(*backend, layer.n, "bias gradients");
    }
}

void Network::Impl::initialize_weights(uint64_t seed) {
    for (size_t wi = 0; wi < weights.size(); ++wi) {
        Weight& w = weights[wi];
        const WeightInit& init = layers[w.destination].config.weight_init;
        engine::HostRng rng(formulas::derive_seed(seed, wi, 0x5EED));
        std::vector<float> host(size_t(w.rows) * w.cols);
        // docs/config-reference.md gives each scheme; fan_in = source width, fan_out = this
        // layer's width (DSSTNE's _inputLayer / _outputLayer strides).
        const double scale = init.scale;
        const double fan_in = double(w.rows), fan_out = double(w.cols);
        // Xavier as DSSTNE defines it: uniform of total width scale * sqrt(6 / (fan_in + fan_out)).
        const double xavier = scale * std::sqrt(6.0 / (fan_in + fan_out));
        const double caffe = scale * std::sqrt(3.0 / fan_out);
        const double selu = scale / std::sqrt(fan_in);
        for (float& v : host) {
            switch (init.scheme) {
                case WeightInitScheme::kXavier:
                    v = float(xavier * (rng.uniform() - 0.5));
                    break;
                case WeightInitScheme::kCaffeXavier:
                    v = float(caffe * (2.0 * rng.uniform() - 1.0));
                    break;
                case WeightInitScheme::kGaussian:
                    v = float(scale * rng.normal());
                    break;
                case WeightInitScheme::kUniform:
                    v = float(scale * (2.0 * rng.uniform() - 1.0));
                    break;
                case WeightInitScheme::kUnitBall:
                    v = float(scale * rng.uniform());
                    break;
                case WeightInitScheme::kConstant:
                    v = float(scale);
                    break;
                case WeightInitScheme::kSelu:
                    v = float(selu * rng.normal());
                    break;
            }
        }
        w.w.upload(host.data(), host.size());
    }
    for (Layer& layer : layers) {
        if (layer.is_input()) continue;
        std::vector<float> bias(layer.n, layer.config.weight_init.bias);
        layer.bias.upload(bias.data(), bias.size());
    }
}

void Network::Impl::ensure_batch_capacity(size_t batch) {
    if (batch <= batch_capacity) return;
    for (Layer& layer : layers) {
        if (layer.is_input()) continue;
        layer.act = DeviceArray<float>(*backend, batch * layer.n, "activations");
        layer.delta = DeviceArray<float>(*backend, batch * layer.n, "deltas");
    }
    batch_capacity = batch;
}

void Network::Impl::ensure_sparse_capacity(size_t nnz) {
    if (nnz <= sparse_nnz_capacity) return;
    for (Weight& w : weights) {
        if (!w.sparse_source) continue;
        const size_t capacity = std::min<size_t>(nnz, w.rows);
        if (capacity <= w.sparse_capacity) continue;
        w.sparse_values =
            DeviceArray<float>(*backend, capacity * w.cols, "sparse weight gradients");
        w.sparse_rows = DeviceArray<uint32_t>(*backend, capacity, "sparse gradient rows");
        w.sparse_count = DeviceArray<uint32_t>(*backend, 1, "sparse gradient row count");
        w.sparse_capacity = capacity;
    }
    sparse_nnz_capacity = nnz;
}

void Network::Impl::ensure_optimizer_state(OptimizerKind kind) {
    const int slots = formulas::optimizer_state_slots(kind);
    const bool fresh = kind != state_kind;
    state_kind = kind;
    auto make = [&](DeviceArray<float>& slot, size_t n, int index) {
        if (index >= slots) {
            slot = DeviceArray<float>();
            return;
        }
        if (!fresh && slot.size() == n) return;
        slot = DeviceArray<float>(*backend, n, "optimizer state");
        backend->fill(slot.data(), n, 0.0f);
    };
    for (Weight& w : weights) {
        const size_t n = size_t(w.rows) * w.cols;
        make(w.state1, n, 0);
        make(w.state2, n, 1);
        if (!w.sparse_source && w.grad.size() != n) {
            w.grad = DeviceArray<float>(*backend, n, "weight gradients");
        }
    }
    for (Layer& layer : layers) {
        if (layer.is_input()) continue;
        make(layer.bias_state1, layer.n, 0);
        make(layer.bias_state2, layer.n, 1);
    }
    if (fresh) optimizer_steps = 0;
}

int Network::Impl::find_parameter(const std::string& name, bool* is_bias) const {
    if (name.rfind("bias:", 0) == 0) {
        auto it = layer_index.find(name.substr(5));
        if (it != layer_index.end() && !layers[it->second].is_input()) {
            *is_bias = true;
            return it->second;
        }
    } else if (name.rfind("weight:", 0) == 0) {
        for (size_t i = 0; i < weights.size(); ++i) {
            const std::string n = "weight:" + layers[weights[i].source].config.name + "->" +
                                  layers[weights[i].destination].config.name;
            if (n == name) {
                *is_bias = false;
                return static_cast<int>(i);
            }
        }
    }
    throw Error(ErrorCategory::kUsage, "unknown parameter '" + name + "'");
}

// ---- Network ----

Network::Network(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;
Network::~Network() = default;

Network Network::create(const NetworkConfig& config,
                        const std::map<std::string, uint32_t>& dataset_widths,
                        const NetworkOptions& options) {
    auto impl = std::make_unique<Impl>();
    impl->config = config;
    impl->options = options;
    impl->backend = make_backend(options.device, options.threads);
    impl->build(dataset_widths);  // resolves "auto" sizes in impl->config
    impl->initialize_weights(options.seed);
    return Network(std::move(impl));
}

Network Network::load(const std::string& path, const NetworkOptions& options) {
    io::ModelFile model = io::read_model(path);
    std::map<std::string, uint32_t> widths;
    for (const LayerConfig& layer : model.config.layers) {
        if (layer.kind != LayerKind::kHidden) widths[layer.dataset] = layer.n;
    }
    Network net = create(model.config, widths, options);
    for (io::ModelWeight& w : model.weights) {
        net.set_parameter("weight:" + w.input_layer + "->" + w.output_layer, w.values);
    }
    for (io::ModelBias& b : model.biases) net.set_parameter("bias:" + b.layer, b.values);
    if (model.weights.size() != net.impl_->weights.size()) {
        throw Error(ErrorCategory::kIo, path + ": the model file holds " +
                                            std::to_string(model.weights.size()) +
                                            " weight matrices; its config needs " +
                                            std::to_string(net.impl_->weights.size()));
    }
    return net;
}

void Network::save(const std::string& path) const {
    io::ModelFile model;
    model.config = impl_->config;
    for (const Weight& w : impl_->weights) {
        io::ModelWeight mw;
        mw.input_layer = impl_->layers[w.source].config.name;
        mw.output_layer = impl_->layers[w.destination].config.name;
        mw.rows = w.rows;
        mw.cols = w.cols;
        mw.values.resize(size_t(w.rows) * w.cols);
        w.w.download(mw.values.data(), mw.values.size());
        model.weights.push_back(std::move(mw));
    }
    for (const Layer& layer : impl_->layers) {
        if (layer.is_input()) continue;
        io::ModelBias b;
        b.layer = layer.config.name;
        b.values.resize(layer.n);
        layer.bias.download(b.values.data(), b.values.size());
        model.biases.push_back(std::move(b));
    }
    io::write_model(path, model);
}

const NetworkConfig& Network::config() const {
    return impl_->config;
}
std::string Network::device() const {
    return impl_->backend->name();
}

uint32_t Network::layer_size(const std::string& layer) const {
    auto it = impl_->layer_index.find(layer);
    if (it == impl_->layer_index.end()) {
        throw Error(ErrorCategory::kUsage, "unknown layer '" + layer + "'");
    }
    return impl_->layers[it->second].n;
}

std::vector<Parameter> Network::parameters() const {
    std::vector<Parameter> params;
    for (const Weight& w : impl_->weights) {
        params.push_back({"weight:" + impl_->layers[w.source].config.name + "->" +
                              impl_->layers[w.destination].config.name,
                          w.rows, w.cols});
    }
    for (const Layer& layer : impl_->layers) {
        if (!layer.is_input()) params.push_back({"bias:" + layer.config.name, 1, layer.n});
    }
    return params;
}

std::vector<float> Network::get_parameter(const std::string& name) const {
    bool is_bias = false;
    const int i = impl_->find_parameter(name, &is_bias);
    const DeviceArray<float>& src = is_bias ? impl_->layers[i].bias : impl_->weights[i].w;
    std::vector<float> values(src.size());
    src.download(values.data(), values.size());
    return values;
}

void Network::set_parameter(const std::string& name, const std::vector<float>& values) {
    bool is_bias = false;
    const int i = impl_->find_parameter(name, &is_bias);
    DeviceArray<float>& dst = is_bias ? impl_->layers[i].bias : impl_->weights[i].w;
    if (values.size() != dst.size()) {
        throw Error(ErrorCategory::kData, "parameter '" + name + "' has " +
                                              std::to_string(dst.size()) + " values; given " +
                                              std::to_string(values.size()));
    }
    dst.upload(values.data(), values.size());
}

}  // namespace sparsenet
