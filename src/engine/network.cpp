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
            w.owner = static_cast<int>(weights.size());
            layers[s].out_weights.push_back(static_cast<int>(weights.size()));
            layers[i].in_weights.push_back(static_cast<int>(weights.size()));
            weights.push_back(std::move(w));
        }
    }
    link_shared_weights(where);
    link_skips(where);
    for (Weight& w : weights) {
        if (w.owner == &w - weights.data()) w.dense_grad = !w.sparse_source || w.users > 1;
    }
    // Topological order (Kahn), stable by position in the config; a skip is an edge like a
    // source.
    std::vector<int> pending(layers.size(), 0);
    for (const Weight& w : weights) pending[w.destination]++;
    for (const Layer& layer : layers) {
        for (int s : layer.out_skips) pending[s]++;
    }
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
        for (int d : layers[l].out_skips) {
            if (--pending[d] == 0) ready.insert(d);
        }
    }
    if (order.size() != layers.size()) {
        throw Error(ErrorCategory::kConfig,
                    where + ": $.Layers: the Source and Skip links form a cycle");
    }
    // Which layers' deltas matter: those with a path to an output layer.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Layer& layer = layers[*it];
        if (layer.is_output()) layer.reaches_output = true;
        for (int wi : layer.out_weights) {
            if (layers[weights[wi].destination].reaches_output) layer.reaches_output = true;
        }
        for (int d : layer.out_skips) {
            if (layers[d].reaches_output) layer.reaches_output = true;
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
        if (w.owner != &w - weights.data()) continue;  // uses its owner's matrix
        w.w = DeviceArray<float>(*backend, size_t(w.rows) * w.cols, "weights");
    }
    for (Layer& layer : layers) {
        if (layer.is_input()) continue;
        layer.bias = DeviceArray<float>(*backend, layer.n, "biases");
        layer.bias_grad = DeviceArray<float>(*backend, layer.n, "bias gradients");
    }
}

void Network::Impl::link_shared_weights(const std::string& where) {
    auto edge = [&](int source, int destination) {
        for (int wi : layers[destination].in_weights) {
            if (weights[wi].source == source) return wi;
        }
        return -1;
    };
    for (size_t i = 0; i < layers.size(); ++i) {
        const std::vector<SharedWeights>& shared = layers[i].config.shared_weights;
        for (size_t k = 0; k < shared.size(); ++k) {
            const SharedWeights& s = shared[k];
            const std::string path = where + ": " + layer_path(i) + ".SharedWeights (entry " +
                                     std::to_string(k) + ", InputLayer '" + s.input_layer + "')";
            // from_json checked these rules; a config built in code may still break them.
            auto index = [&](const std::string& name) {
                auto it = layer_index.find(name);
                return it == layer_index.end() ? -1 : it->second;
            };
            const int in = index(s.input_layer);
            const int src_in = index(s.source_input_layer);
            const int src_out = index(s.source_output_layer);
            const int e = in < 0 ? -1 : edge(in, static_cast<int>(i));
            const int o = src_in < 0 || src_out < 0 ? -1 : edge(src_in, src_out);
            if (e < 0 || o < 0 || e == o || weights[e].owner != e || weights[o].owner != o) {
                throw Error(ErrorCategory::kConfig,
                            path + ": the tie names no edge of this layer, no edge '" +
                                s.source_input_layer + "' -> '" + s.source_output_layer +
                                "', the same edge twice, or an edge that is itself shared; "
                                "expected a source of this layer tied to another edge that owns "
                                "its matrix");
            }
            Weight& use = weights[e];
            Weight& owner = weights[o];
            const uint32_t rows = s.transposed ? owner.cols : owner.rows;
            const uint32_t cols = s.transposed ? owner.rows : owner.cols;
            if (rows != use.rows || cols != use.cols) {
                throw Error(ErrorCategory::kConfig,
                            path + ": the edge '" + s.input_layer + "' -> '" +
                                layers[i].config.name + "' needs a " + std::to_string(use.rows) +
                                " x " + std::to_string(use.cols) + " matrix, but '" +
                                s.source_input_layer + "' -> '" + s.source_output_layer + "' is " +
                                std::to_string(owner.rows) + " x " + std::to_string(owner.cols) +
                                (s.transposed ? " (transposed: " + std::to_string(rows) + " x " +
                                                    std::to_string(cols) + ")"
                                              : "") +
                                "; expected matching sizes" +
                                (s.transposed ? "" : ", or \"Transposed\": true"));
            }
            // An Input source multiplies by gathering rows of the matrix (csr_matmul); the
            // transposed product would gather its columns, which no op does yet.
            if (s.transposed && use.sparse_source) {
                throw Error(ErrorCategory::kNotImplemented,
                            path +
                                ": not implemented yet: SharedWeights with Transposed on an edge "
                                "from an Input layer ('" +
                                s.input_layer +
                                "'); share the matrix untransposed, or tie it "
                                "the other way round (the Input edge owns the matrix)");
            }
            use.owner = o;
            use.transposed = s.transposed;
            owner.users++;
        }
    }
    for (const Weight& w : weights) {
        if (weights[w.owner].owner != w.owner) {  // a later entry shared an earlier owner
            throw Error(ErrorCategory::kConfig,
                        where +
                            ": $.Layers: SharedWeights form a chain (an edge both uses and "
                            "lends a matrix); expected every tie to name an edge that owns "
                            "its matrix");
        }
    }
}

void Network::Impl::link_skips(const std::string& where) {
    for (size_t i = 0; i < layers.size(); ++i) {
        for (const std::string& name : layers[i].config.skips) {
            const std::string path = where + ": " + layer_path(i) + ".Skip";
            auto it = layer_index.find(name);
            if (it == layer_index.end()) {
                throw Error(ErrorCategory::kConfig, path + ": unknown layer '" + name + "'");
            }
            const int s = it->second;
            const Layer& skipped = layers[s];
            // Input activations are CSR datasets, never dense buffers; an Output layer's delta
            // is its loss delta, with no room for a gradient from another layer (as for Source).
            if (skipped.is_input() || skipped.is_output()) {
                throw Error(ErrorCategory::kNotImplemented,
                            path + ": not implemented yet: Skip from an " +
                                to_string(skipped.config.kind) + " layer ('" + name + "')");
            }
            if (skipped.n != layers[i].n) {
                throw Error(ErrorCategory::kConfig,
                            path + ": layer '" + name + "' has N = " + std::to_string(skipped.n) +
                                " but layer '" + layers[i].config.name +
                                "' has N = " + std::to_string(layers[i].n) +
                                "; expected a skipped layer as wide as this one");
            }
            layers[i].skips.push_back(s);
            layers[s].out_skips.push_back(static_cast<int>(i));
        }
    }
}

void Network::Impl::initialize_weights(uint64_t seed) {
    for (size_t wi = 0; wi < weights.size(); ++wi) {
        Weight& w = weights[wi];
        if (w.owner != static_cast<int>(wi)) continue;  // initialised by its owner's WeightInit
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
        if (w.owner != &w - weights.data()) continue;  // state and gradient live on the owner
        const size_t n = size_t(w.rows) * w.cols;
        make(w.state1, n, 0);
        make(w.state2, n, 1);
        if (w.dense_grad && w.grad.size() != n) {
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
        for (const Weight& w : weights) {
            if (weight_name(w) == name) {
                *is_bias = false;
                return w.owner;
            }
        }
    }
    throw Error(ErrorCategory::kUsage, "unknown parameter '" + name + "'");
}

std::string Network::Impl::weight_name(const Weight& w) const {
    return "weight:" + layers[w.source].config.name + "->" + layers[w.destination].config.name;
}

std::vector<float> Network::Impl::weight_gradient(int wi) {
    Weight& w = weights[wi];
    std::vector<float> dense(size_t(w.rows) * w.cols, 0.0f);
    if (!w.grad_ready) return dense;
    if (w.dense_grad) {
        w.grad.download(dense.data(), dense.size());
        return dense;
    }
    uint32_t n = 0;
    w.sparse_count.download(&n, 1);
    std::vector<uint32_t> rows(n);
    std::vector<float> values(size_t(n) * w.cols);
    if (n > 0) {
        w.sparse_rows.download(rows.data(), n);
        w.sparse_values.download(values.data(), values.size());
    }
    for (uint32_t i = 0; i < n; ++i) {
        std::copy(values.begin() + size_t(i) * w.cols, values.begin() + size_t(i + 1) * w.cols,
                  dense.begin() + size_t(rows[i]) * w.cols);
    }
    return dense;
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
    Impl& impl = *net.impl_;
    if (model.weights.size() != impl.weights.size()) {
        throw Error(ErrorCategory::kIo, path + ": the model file holds " +
                                            std::to_string(model.weights.size()) +
                                            " weight matrices; its config needs " +
                                            std::to_string(impl.weights.size()));
    }
    // The config restores the ties; the file's bShared entries must agree with it, and only
    // the matrices that own their values carry them.
    for (size_t i = 0; i < model.weights.size(); ++i) {
        const io::ModelWeight& mw = model.weights[i];
        const Weight& w = impl.weights[i];
        const std::string name = "weight:" + mw.input_layer + "->" + mw.output_layer;
        const Weight& owner = impl.weights[w.owner];
        const bool shared = w.owner != static_cast<int>(i);
        const bool agrees =
            impl.weight_name(w) == name && mw.shared == shared &&
            (!shared || (mw.transposed == w.transposed &&
                         mw.source_input_layer == impl.layers[owner.source].config.name &&
                         mw.source_output_layer == impl.layers[owner.destination].config.name));
        if (!agrees) {
            throw Error(ErrorCategory::kIo, path + ": weight" + std::to_string(i) + " (" +
                                                mw.input_layer + " -> " + mw.output_layer +
                                                ") does not match the edge or the weight sharing "
                                                "of the model's config");
        }
        if (!shared) net.set_parameter(name, mw.values);
    }
    for (io::ModelBias& b : model.biases) net.set_parameter("bias:" + b.layer, b.values);
    return net;
}

void Network::save(const std::string& path) const {
    io::ModelFile model;
    model.config = impl_->config;
    for (size_t i = 0; i < impl_->weights.size(); ++i) {
        const Weight& w = impl_->weights[i];
        io::ModelWeight mw;
        mw.input_layer = impl_->layers[w.source].config.name;
        mw.output_layer = impl_->layers[w.destination].config.name;
        mw.rows = w.rows;
        mw.cols = w.cols;
        if (w.owner != static_cast<int>(i)) {  // stored once, with its owner
            const Weight& owner = impl_->weights[w.owner];
            mw.shared = true;
            mw.transposed = w.transposed;
            mw.source_input_layer = impl_->layers[owner.source].config.name;
            mw.source_output_layer = impl_->layers[owner.destination].config.name;
        } else {
            mw.values.resize(size_t(w.rows) * w.cols);
            w.w.download(mw.values.data(), mw.values.size());
        }
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
    for (size_t i = 0; i < impl_->weights.size(); ++i) {
        const Weight& w = impl_->weights[i];
        // A shared matrix is one parameter, named after its owner edge.
        if (w.owner == static_cast<int>(i))
            params.push_back({impl_->weight_name(w), w.rows, w.cols});
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
