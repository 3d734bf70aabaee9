// Network construction, parameters, save and load.
#include <omp.h>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include "backend/out_of_memory.h"
#include "comm/node_rank.h"
#include "engine/host_rng.h"
#include "engine/network_impl.h"
#include "io/model_file.h"
#include "sparsenet/error.h"

namespace sparsenet {

using engine::GraphEdge;
using engine::GraphLayer;

namespace {

std::string join_names(const std::map<std::string, uint32_t>& m) {
    std::string s;
    for (const auto& kv : m) s += (s.empty() ? "" : ", ") + kv.first;
    return s.empty() ? "(none)" : s;
}

std::string layer_path(size_t i) {
    return "$.Layers[" + std::to_string(i) + "]";
}

// NaN and infinite values in backend memory, downloaded `chunk` floats at a time.
size_t count_nonfinite(Backend& backend, const DeviceArray<float>& values, size_t chunk) {
    std::vector<float> host(std::min(chunk, values.size()));
    size_t bad = 0;
    for (size_t first = 0; first < values.size(); first += chunk) {
        const size_t count = std::min(chunk, values.size() - first);
        backend.download(host.data(), values.data() + first, count * sizeof(float));
        bad += size_t(std::count_if(host.begin(), host.begin() + count,
                                    [](float v) { return !std::isfinite(v); }));
    }
    return bad;
}

}  // namespace

void Network::Impl::build(const std::map<std::string, uint32_t>& dataset_widths) {
    // The graph's rules (every name known, ties between edges that own their matrix, no cycle)
    // are the config's (NetworkConfig::validate); what build() checks needs the datasets' widths
    // or is what this engine can run.
    graph.config.validate();
    const std::string& where =
        graph.config.name.empty() ? std::string("network") : graph.config.name;
    graph.layers.clear();
    graph.edges.clear();
    graph.layers.resize(graph.config.layers.size());
    for (size_t i = 0; i < graph.config.layers.size(); ++i) {
        LayerConfig& lc = graph.config.layers[i];
        graph.layer_index[lc.name] = static_cast<int>(i);
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
        graph.layers[i].config = lc;
        graph.layers[i].n = lc.n;
        graph.layers[i].activation.kind = lc.activation;
        graph.layers[i].activation.slope = lc.relu_slope;
        graph.layers[i].activation.alpha = lc.elu_alpha;
        graph.layers[i].activation.lambda = lc.selu_lambda;
    }
    // One weight matrix per (source -> layer) edge.
    for (size_t i = 0; i < graph.config.layers.size(); ++i) {
        for (const std::string& src_name : graph.config.layers[i].sources) {
            const int s = graph.layer_index.at(src_name);  // validate(): every Source names a layer
            if (graph.layers[s].is_output()) {
                throw Error(ErrorCategory::kNotImplemented,
                            where + ": " + layer_path(i) +
                                ".Source: not implemented yet: an Output layer ('" + src_name +
                                "') as a Source");
            }
            GraphEdge w;
            w.source = s;
            w.destination = static_cast<int>(i);
            w.rows = graph.layers[s].n;
            w.cols = graph.layers[i].n;
            w.sparse_source = graph.layers[s].is_input();
            w.owner = static_cast<int>(graph.edges.size());
            for (const FixedWeights& fw : graph.config.layers[i].fixed_weights) {
                if (fw.source != src_name) continue;
                if (w.rows != w.cols) {
                    throw Error(ErrorCategory::kConfig,
                                where + ": " + layer_path(i) + ".FixedWeights: the edge '" +
                                    src_name + "' -> '" + graph.config.layers[i].name + "' is [" +
                                    std::to_string(w.rows) + ", " + std::to_string(w.cols) +
                                    "]; expected a square item-item matrix (the Input layer as "
                                    "wide as this layer)");
                }
                w.fixed = true;
                w.fixed_in_training = fw.in_training;
            }
            graph.layers[s].out_weights.push_back(static_cast<int>(graph.edges.size()));
            graph.layers[i].in_weights.push_back(static_cast<int>(graph.edges.size()));
            graph.edges.push_back(std::move(w));
        }
    }
    link_shared_weights(where);
    link_skips(where);
    plan_parallel(where);
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        const GraphEdge& w = graph.edges[i];
        if (w.fixed && plan.split()) {
            throw Error(ErrorCategory::kNotImplemented,
                        where + ": not implemented yet: FixedWeights in a network split over " +
                            std::to_string(plan.ranks) +
                            " ranks (use one rank or --parallel data)");
        }
        // Data parallelism sums whole gradients over the ranks: sparse sources scatter theirs.
        if (w.owner == static_cast<int>(i)) {
            plan.edges[i].dense_grad =
                !w.fixed && (!w.sparse_source || w.users > 1 || plan.data_parallel);
        }
    }
    // Topological order (Kahn), stable by position in the config; a skip is an edge like a
    // source.
    std::vector<int> pending(graph.layers.size(), 0);
    for (const GraphEdge& w : graph.edges) pending[w.destination]++;
    for (const GraphLayer& layer : graph.layers) {
        for (int s : layer.out_skips) pending[s]++;
    }
    graph.order.clear();
    std::set<int> ready;
    for (size_t i = 0; i < graph.layers.size(); ++i) {
        if (pending[i] == 0) ready.insert(static_cast<int>(i));
    }
    while (!ready.empty()) {
        const int l = *ready.begin();
        ready.erase(ready.begin());
        graph.order.push_back(l);
        for (int wi : graph.layers[l].out_weights) {
            if (--pending[graph.edges[wi].destination] == 0)
                ready.insert(graph.edges[wi].destination);
        }
        for (int d : graph.layers[l].out_skips) {
            if (--pending[d] == 0) ready.insert(d);
        }
    }
    if (graph.order.size() != graph.layers.size()) {
        throw Error(ErrorCategory::kInternal, where + ": a cycle passed NetworkConfig::validate");
    }
    // Which layers' deltas matter: those with a path to an output layer.
    for (auto it = graph.order.rbegin(); it != graph.order.rend(); ++it) {
        GraphLayer& layer = graph.layers[*it];
        if (layer.is_output()) layer.reaches_output = true;
        for (int wi : layer.out_weights) {
            if (graph.layers[graph.edges[wi].destination].reaches_output)
                layer.reaches_output = true;
        }
        for (int d : layer.out_skips) {
            if (graph.layers[d].reaches_output) layer.reaches_output = true;
        }
    }
}

engine::Band Network::Impl::moving_side() const {
    engine::Band most;
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        const GraphEdge& w = graph.edges[i];
        const engine::Split split = plan.edges[i].split;
        if (split == engine::Split::kNone) continue;
        const int moved = split == engine::Split::kByInput ? w.destination : w.source;
        most.offset = std::max(most.offset, graph.layers[moved].n);
        most.count = std::max(most.count, plan.layers[moved].cap);
    }
    return most;
}

void Network::Impl::largest_block(int wi, double* rows, double* ld) const {
    const GraphEdge& w = graph.edges[wi];
    const engine::Split split = plan.edges[wi].split;
    *rows = split == engine::Split::kByInput ? plan.layers[w.source].cap : w.rows;
    *ld = padded_ld(split == engine::Split::kByOutput ? plan.layers[w.destination].cap : w.cols);
}

double Network::Impl::largest_band_floats(int l) const {
    // ensure_batch_capacity: max(cap, ld) per row; padded_ld(cap) bounds every rank's ld.
    const uint32_t cap = plan.layers[l].cap;
    return std::max(cap, padded_ld(cap));
}

void Network::Impl::allocate_parameters() {
    params.layers.resize(graph.layers.size());
    params.edges.resize(graph.edges.size());
    buffers.layers.resize(graph.layers.size());
    buffers.edges.resize(graph.edges.size());
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        if (graph.edges[i].owner != static_cast<int>(i)) continue;  // uses its owner's matrix
        const engine::EdgeSplit& block = plan.edges[i];
        engine::EdgeParams& matrix = params.edges[i];
        if (matrix.kept == engine::Kept::kNothing) continue;
        if (matrix.kept == engine::Kept::kBf16Only) {  // every row written whole by the load
            matrix.w_bf16 = DeviceArray<uint16_t>(*backend, block.elements(), "BF16 input weights");
            continue;
        }
        matrix.w = DeviceArray<float>(*backend, block.elements(), "weights");
        if (block.ld != block.local_cols) backend->fill(matrix.w.data(), block.elements(), 0.0f);
    }
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        if (graph.layers[l].is_input()) continue;
        const uint32_t n_local = plan.layers[l].n_local;
        params.layers[l].bias = DeviceArray<float>(*backend, n_local, "biases");
        buffers.layers[l].bias_grad = DeviceArray<float>(*backend, n_local, "bias gradients");
    }
}

namespace engine {

Band band_of(uint32_t n, int ranks, int rank) {
    const auto lo = uint32_t(uint64_t(n) * uint64_t(rank) / uint64_t(ranks));
    const auto hi = uint32_t(uint64_t(n) * uint64_t(rank + 1) / uint64_t(ranks));
    return {lo, hi - lo};
}

uint32_t padded_ld(uint32_t cols, bool pad) {
    if (!pad || cols % kPadFloats == 0) return cols;
    return uint32_t((uint64_t(cols) + kPadFloats - 1) / kPadFloats * kPadFloats);
}

const char* to_string(Split split) {
    switch (split) {
        case Split::kNone:
            return "none";
        case Split::kByOutput:
            return "by output columns";
        case Split::kByInput:
            return "by input rows";
    }
    return "?";
}

}  // namespace engine

void Network::Impl::plan_parallel(const std::string& where) {
    plan.job_ranks = plan.comm ? plan.comm->size() : 1;
    plan.job_rank = plan.comm ? plan.comm->rank() : 0;
    plan.data_parallel = false;
    ParallelMode mode = options.parallel;
    if (plan.job_ranks == 1) {
        plan_split(where, 1, 0);
        return;
    }
    if (mode == ParallelMode::kAuto) {
        try {
            plan_split(where, plan.job_ranks, plan.job_rank);
            const double batch = options.batch > 0       ? double(options.batch)
                                 : graph.config.training ? double(graph.config.training->batch)
                                                         : 1024.0;
            mode = model_bytes_per_step(batch) <= data_bytes_per_step(plan.job_ranks)
                       ? ParallelMode::kModel
                       : ParallelMode::kData;
        } catch (const Error& e) {
            if (e.category() != ErrorCategory::kNotImplemented) throw;
            mode = ParallelMode::kData;  // something a split network cannot run yet
        }
    }
    if (mode == ParallelMode::kModel) {
        plan_split(where, plan.job_ranks, plan.job_rank);
        return;
    }
    plan_split(where, 1, 0);
    plan.data_parallel = true;
    for (const GraphLayer& layer : graph.layers) {
        if (layer.config.has_sparseness_penalty()) {
            throw Error(ErrorCategory::kNotImplemented,
                        where + ": layer '" + layer.config.name +
                            "': not implemented yet: a sparseness penalty under data parallelism "
                            "(its unit means are over the whole batch, which no rank holds)");
        }
    }
}

double Network::Impl::model_bytes_per_step(double batch) const {
    double bytes = 0.0;
    const double P = plan.ranks, f = sizeof(float);
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        const GraphEdge& w = graph.edges[i];
        const GraphLayer& src = graph.layers[w.source];
        const uint32_t src_cap = plan.layers[w.source].cap;
        const uint32_t dst_cap = plan.layers[w.destination].cap;
        if (plan.edges[i].split == engine::Split::kByOutput) {
            bytes += (P - 1) * batch * src_cap * f;  // gather the source activations
            if (src.reaches_output && !src.is_input()) bytes += (P - 1) * batch * src_cap * f;
        } else if (plan.edges[i].split == engine::Split::kByInput) {
            bytes += 2.0 * (P - 1) * batch * dst_cap * f;  // partial z, then dz
        }
    }
    for (const GraphLayer& layer : graph.layers) {
        if (plan.ranks > 1 && !layer.is_input() && layer.activation.kind == Activation::kSoftMax) {
            bytes += 2.0 * (P - 1) * batch * f;  // row max and row sum
        }
    }
    return bytes;
}

double Network::Impl::data_bytes_per_step(int num_ranks) const {
    double values = 0.0;
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        if (graph.edges[i].owner == static_cast<int>(i))
            values += double(graph.edges[i].rows) * graph.edges[i].cols;
    }
    for (const GraphLayer& layer : graph.layers) {
        if (!layer.is_input()) values += layer.n;
    }
    const double P = num_ranks;
    return num_ranks > 1 ? 2.0 * (P - 1) / P * values * sizeof(float) : 0.0;
}

void Network::Impl::all_reduce_gradients() {
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        engine::EdgeBuffers& g = buffers.edges[i];
        if (graph.edges[i].owner != static_cast<int>(i) || !g.grad_ready) continue;
        const engine::EdgeSplit& block = plan.edges[i];
        plan.comm->all_reduce(g.grad.data(), block.elements(), CommType::kFloat32, CommOp::kSum);
    }
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        if (layer.is_input() || !layer.reaches_output) continue;
        plan.comm->all_reduce(buffers.layers[l].bias_grad.data(), plan.layers[l].n_local,
                              CommType::kFloat32, CommOp::kSum);
    }
}

void Network::Impl::zero_gradients() {
    // What backward marks: every matrix used by a layer that reaches an output.
    for (engine::EdgeBuffers& e : buffers.edges) e.grad_ready = false;
    for (const GraphEdge& w : graph.edges) {
        engine::EdgeBuffers& m = buffers.edges[w.owner];
        if (!graph.layers[w.destination].reaches_output || m.grad_ready ||
            graph.edges[w.owner].fixed) {
            continue;
        }
        const engine::EdgeSplit& block = plan.edges[w.owner];
        backend->fill(dense_gradient(w.owner).data, block.elements(), 0.0f);
        m.grad_ready = true;
    }
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        if (layer.is_input() || !layer.reaches_output) continue;
        backend->fill(buffers.layers[l].bias_grad.data(), plan.layers[l].n_local, 0.0f);
    }
}

engine::Split Network::Impl::split_rule(const GraphEdge& w) {
    // A sparse Input gathers rows of its band of W; a dense edge moves its smaller side.
    return (w.sparse_source || w.rows > w.cols) ? engine::Split::kByInput
                                                : engine::Split::kByOutput;
}

void Network::Impl::plan_split(const std::string& where, int num_ranks, int this_rank) {
    plan.rank = this_rank;
    plan.ranks = num_ranks;
    const int ranks = num_ranks;
    // Sized once (build); a later plan (describe_model_parallel) keeps each edge's dense_grad.
    plan.layers.resize(graph.layers.size());
    plan.edges.resize(graph.edges.size());
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const uint32_t n = graph.layers[l].n;
        engine::LayerBand& band = plan.layers[l];
        const engine::Band b = engine::band_of(n, ranks, this_rank);
        band.offset = b.offset;
        band.n_local = b.count;
        band.cap = uint32_t((uint64_t(n) + ranks - 1) / ranks);
        band.ld = padded_ld(b.count);
        band.whole_ld = padded_ld(n);
        band.delta_over_act = delta_over_activation(int(l));
    }
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        engine::EdgeSplit& block = plan.edges[i];
        block.split = engine::Split::kNone;
        block.local_rows = graph.edges[i].rows;
        block.local_cols = graph.edges[i].cols;
        block.row_offset = block.col_offset = 0;
        block.ld = padded_ld(block.local_cols);
    }
    if (ranks == 1) return;
    const std::string why = " under model parallelism (" + std::to_string(ranks) + " ranks)";
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        const GraphEdge& w = graph.edges[i];
        engine::EdgeSplit& block = plan.edges[i];
        const GraphLayer& src = graph.layers[w.source];
        const GraphLayer& dst = graph.layers[w.destination];
        const engine::LayerBand& src_band = plan.layers[w.source];
        const engine::LayerBand& dst_band = plan.layers[w.destination];
        if (w.owner != static_cast<int>(i) || w.users > 1) {
            throw Error(ErrorCategory::kNotImplemented,
                        where + ": layer '" + dst.config.name +
                            "': not implemented yet: SharedWeights" + why);
        }
        block.split = split_rule(w);
        if (block.split == engine::Split::kByInput) {
            block.local_rows = src_band.n_local;
            block.row_offset = src_band.offset;
            if (dst.config.weight_norm > 0.0f) {
                throw Error(ErrorCategory::kNotImplemented,
                            where + ": layer '" + dst.config.name +
                                "': not implemented yet: WeightNorm on a matrix split by input "
                                "rows (its source '" +
                                src.config.name + "' is wider than it, or an Input)" + why);
            }
        } else {
            block.local_cols = dst_band.n_local;
            block.col_offset = dst_band.offset;
        }
        block.ld = padded_ld(block.local_cols);  // save chunks are repacked
    }
    for (const GraphLayer& layer : graph.layers) {
        if (layer.is_output() && layer.config.activation == Activation::kSoftMax &&
            graph.config.error_function != ErrorFunction::kCrossEntropy) {
            throw Error(ErrorCategory::kNotImplemented,
                        where + ": layer '" + layer.config.name +
                            "': not implemented yet: a SoftMax output with " +
                            to_string(graph.config.error_function) + why +
                            " (CrossEntropy, the multinomial loss, is)");
        }
    }
}

void Network::Impl::link_shared_weights(const std::string& where) {
    auto edge = [&](int source, int destination) {
        for (int wi : graph.layers[destination].in_weights) {
            if (graph.edges[wi].source == source) return wi;
        }
        return -1;
    };
    for (size_t i = 0; i < graph.layers.size(); ++i) {
        const std::vector<SharedWeights>& shared = graph.layers[i].config.shared_weights;
        for (size_t k = 0; k < shared.size(); ++k) {
            const SharedWeights& s = shared[k];
            const std::string path = where + ": " + layer_path(i) + ".SharedWeights (entry " +
                                     std::to_string(k) + ", InputLayer '" + s.input_layer + "')";
            // NetworkConfig::validate checked the tie: an edge of this layer, tied once, to
            // another edge that owns its matrix.
            const int e = edge(graph.layer_index.at(s.input_layer), static_cast<int>(i));
            const int o = edge(graph.layer_index.at(s.source_input_layer),
                               graph.layer_index.at(s.source_output_layer));
            if (e < 0 || o < 0 || e == o || graph.edges[e].owner != e ||
                graph.edges[o].owner != o) {
                throw Error(ErrorCategory::kInternal,
                            path + ": a tie that NetworkConfig::validate should have refused");
            }
            GraphEdge& use = graph.edges[e];
            GraphEdge& owner = graph.edges[o];
            const uint32_t rows = s.transposed ? owner.cols : owner.rows;
            const uint32_t cols = s.transposed ? owner.rows : owner.cols;
            if (rows != use.rows || cols != use.cols) {
                throw Error(
                    ErrorCategory::kConfig,
                    path + ": the edge '" + s.input_layer + "' -> '" + graph.layers[i].config.name +
                        "' needs a " + std::to_string(use.rows) + " x " + std::to_string(use.cols) +
                        " matrix, but '" + s.source_input_layer + "' -> '" + s.source_output_layer +
                        "' is " + std::to_string(owner.rows) + " x " + std::to_string(owner.cols) +
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
    for (const GraphEdge& w : graph.edges) {
        if (graph.edges[w.owner].owner != w.owner) {  // a later entry shared an earlier owner
            throw Error(ErrorCategory::kConfig,
                        where +
                            ": $.Layers: SharedWeights form a chain (an edge both uses and "
                            "lends a matrix); expected every tie to name an edge that owns "
                            "its matrix");
        }
    }
}

void Network::Impl::link_skips(const std::string& where) {
    for (size_t i = 0; i < graph.layers.size(); ++i) {
        for (const std::string& name : graph.layers[i].config.skips) {
            const std::string path = where + ": " + layer_path(i) + ".Skip";
            const int s = graph.layer_index.at(name);  // validate(): every Skip names a layer
            const GraphLayer& skipped = graph.layers[s];
            // Input activations are CSR datasets, never dense buffers; an Output layer's delta
            // is its loss delta, with no room for a gradient from another layer (as for Source).
            if (skipped.is_input() || skipped.is_output()) {
                throw Error(ErrorCategory::kNotImplemented,
                            path + ": not implemented yet: Skip from an " +
                                to_string(skipped.config.kind) + " layer ('" + name + "')");
            }
            if (skipped.n != graph.layers[i].n) {
                throw Error(ErrorCategory::kConfig,
                            path + ": layer '" + name + "' has N = " + std::to_string(skipped.n) +
                                " but layer '" + graph.layers[i].config.name +
                                "' has N = " + std::to_string(graph.layers[i].n) +
                                "; expected a skipped layer as wide as this one");
            }
            graph.layers[i].skips.push_back(s);
            graph.layers[s].out_skips.push_back(static_cast<int>(i));
        }
    }
}

void Network::Impl::initialize_weights(uint64_t seed) {
    for (size_t wi = 0; wi < graph.edges.size(); ++wi) {
        const GraphEdge& w = graph.edges[wi];
        if (w.owner != static_cast<int>(wi)) continue;  // initialised by its owner's WeightInit
        if (w.fixed) {  // zeros until the fit (no draws: an item-item matrix may be huge)
            const engine::EdgeSplit& block = plan.edges[wi];
            backend->fill(params.edges[wi].w.data(), block.elements(), 0.0f);
            params.fits_pending = true;
            continue;
        }
        const WeightInit& init = graph.layers[w.destination].config.weight_init;
        // docs/config-reference.md gives each scheme; fan_in = source width, fan_out = this
        // layer's width (DSSTNE's _inputLayer / _outputLayer strides).
        const double scale = init.scale;
        const double fan_in = double(w.rows), fan_out = double(w.cols);
        // Xavier as DSSTNE defines it: uniform of total width scale * sqrt(6 / (fan_in + fan_out)).
        const double xavier = scale * std::sqrt(6.0 / (fan_in + fan_out));
        const double caffe = scale * std::sqrt(3.0 / fan_out);
        const double selu = scale / std::sqrt(fan_in);
        auto draw = [&](engine::HostRng& rng) -> float {
            switch (init.scheme) {
                case WeightInitScheme::kXavier:
                    return float(xavier * (rng.uniform() - 0.5));
                case WeightInitScheme::kCaffeXavier:
                    return float(caffe * (2.0 * rng.uniform() - 1.0));
                case WeightInitScheme::kGaussian:
                    return float(scale * rng.normal());
                case WeightInitScheme::kUniform:
                    return float(scale * (2.0 * rng.uniform() - 1.0));
                case WeightInitScheme::kUnitBall:
                    return float(scale * rng.uniform());
                case WeightInitScheme::kConstant:
                    return float(scale);
                case WeightInitScheme::kSelu:
                    return float(selu * rng.normal());
            }
            return 0.0f;
        };
        // The matrix is one stream of draws in row-major order over [rows, cols]; a split network
        // skips to its block's rows, so every rank count gives the same matrix.
        const uint64_t per_value =
            init.scheme == WeightInitScheme::kConstant ? 0
            : (init.scheme == WeightInitScheme::kGaussian || init.scheme == WeightInitScheme::kSelu)
                ? 2
                : 1;
        // Drawn by chunks of rows of at most kStagingRowFloats values (a 10,000,000 x 256 matrix
        // drawn whole held 10 GB more on the host), each chunk's rows in parallel: a row's draws
        // start where the stream stands at its first value (HostRng::skip is O(1)), so the
        // matrix is the same for any thread count.
        const engine::EdgeSplit& block = plan.edges[wi];
        const uint64_t stream = formulas::derive_seed(seed, wi, 0x5EED);
        const size_t cols = block.local_cols;
        const size_t chunk_rows =
            std::max<size_t>(1, kStagingRowFloats / std::max<size_t>(1, cols));
        std::vector<float> host(std::min<size_t>(block.local_rows, chunk_rows) * cols);
        const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
        for (size_t r0 = 0; r0 < block.local_rows; r0 += chunk_rows) {
            const size_t n = std::min<size_t>(chunk_rows, block.local_rows - r0);
            const bool par = threads > 1 && n > 1 && n * cols >= (size_t(1) << 16);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
            for (size_t r = 0; r < n; ++r) {
                const uint64_t first =
                    (uint64_t(block.row_offset) + r0 + r) * w.cols + block.col_offset;
                engine::HostRng rng(stream);
                rng.skip(first * per_value);
                float* out = host.data() + r * cols;
                for (size_t c = 0; c < cols; ++c) out[c] = draw(rng);
            }
            upload_rows(params.edges[wi].w, block.ld, r0, n, cols, host.data());
        }
    }
    initialize_biases();
    sync_bf16_copies();
}

void Network::Impl::initialize_biases() {
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        if (layer.is_input()) continue;
        std::vector<float> bias(plan.layers[l].n_local, layer.config.weight_init.bias);
        params.layers[l].bias.upload(bias.data(), bias.size());
    }
}

void Network::Impl::ensure_batch_capacity(size_t batch) {
    if (batch <= buffers.batch_capacity) return;
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        if (graph.layers[l].is_input()) continue;
        // cap columns per row for the collectives, ld for the padded rows (one of the two
        // exceeds n_local at most). Zeros in the padding: flat sums over a buffer (the guard)
        // read it.
        const size_t n = batch * std::max(plan.layers[l].cap, plan.layers[l].ld);
        buffers.layers[l].act = DeviceArray<float>(*backend, n, "activations");
        // An output layer whose delta is written over its activations has no delta buffer.
        const bool own_delta = !plan.layers[l].delta_over_act;
        if (own_delta) buffers.layers[l].delta = DeviceArray<float>(*backend, n, "deltas");
        if (graph.layers[l].is_output()) {
            buffers.layers[l].act_norms =
                DeviceArray<float>(*backend, batch, "activation norms (finite-value guard)");
        }
        if (plan.layers[l].ld != plan.layers[l].n_local) {
            backend->fill(buffers.layers[l].act.data(), n, 0.0f);
            if (own_delta) backend->fill(buffers.layers[l].delta.data(), n, 0.0f);
        }
        if (gathers_delta(int(l))) {
            const size_t whole = batch * plan.layers[l].whole_ld;
            buffers.layers[l].delta_all = DeviceArray<float>(*backend, whole, "gathered deltas");
            backend->fill(buffers.layers[l].delta_all.data(), whole, 0.0f);  // zero padding
        }
    }
    if (plan.split()) {
        // Collectives move the smaller side of each matrix only: the scratch is sized by those
        // layers, never by a wide output layer. The partial rows of every moving layer (row
        // stride padded_ld(n) <= padded_ld(moving.offset)) share one buffer.
        const engine::Band moving = moving_side();
        const size_t partial = batch * padded_ld(moving.offset);
        plan.full_partial = DeviceArray<float>(*backend, partial, "partial rows");
        backend->fill(plan.full_partial.data(), partial, 0.0f);
        plan.comm_blocks = DeviceArray<float>(*backend, size_t(plan.ranks) * batch * moving.count,
                                              "collective blocks");
        plan.comm_local = DeviceArray<float>(*backend, batch * moving.count, "collective band");
        plan.row_stat = DeviceArray<float>(*backend, 2 * batch, "row statistics");  // two [batch]
        for (size_t i = 0; i < graph.edges.size(); ++i) {
            if (plan.edges[i].split != engine::Split::kByOutput) continue;
            const size_t whole = batch * plan.layers[graph.edges[i].source].whole_ld;
            buffers.edges[i].gathered = DeviceArray<float>(*backend, whole, "gathered activations");
            backend->fill(buffers.edges[i].gathered.data(), whole, 0.0f);  // zero padding
        }
    }
    buffers.batch_capacity = batch;
    sync_activation_copies();  // Precision::kBf16: the BF16 copies GEMMs read, batch x ld
}

void Network::Impl::ensure_sparse_capacity(size_t nnz) {
    if (nnz <= buffers.sparse_nnz_capacity) return;
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        engine::EdgeBuffers& g = buffers.edges[i];
        if (!graph.edges[i].sparse_source || graph.edges[i].fixed) continue;
        const size_t capacity = std::min<size_t>(nnz, plan.edges[i].local_rows);
        if (capacity <= g.sparse_capacity) continue;
        g.sparse_values = DeviceArray<float>(*backend, capacity * plan.edges[i].local_cols,
                                             "sparse weight gradients");
        g.sparse_rows = DeviceArray<uint32_t>(*backend, capacity, "sparse gradient rows");
        g.sparse_count = DeviceArray<uint32_t>(*backend, 1, "sparse gradient row count");
        g.sparse_capacity = capacity;
    }
    buffers.sparse_nnz_capacity = nnz;
}

void Network::Impl::ensure_optimizer_state(OptimizerKind kind) {
    catch_up_all();  // no row stays behind on a rule whose state may be replaced
    const int slots = formulas::optimizer_state_slots(kind);
    const bool fresh = kind != params.state_kind;
    params.state_kind = kind;
    auto make = [&](DeviceArray<float>& slot, size_t n, int index) {
        if (index >= slots) {
            slot = DeviceArray<float>();
            return;
        }
        if (!fresh && slot.size() == n) return;
        slot = DeviceArray<float>(*backend, n, "optimizer state");
        backend->fill(slot.data(), n, 0.0f);
    };
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        // State on the owner; its dense gradient is allocated by its first write
        // (dense_gradient), so a fused step never holds one.
        if (graph.edges[i].owner != static_cast<int>(i)) continue;
        if (graph.edges[i].fixed) continue;  // never trained
        const size_t n = plan.edges[i].elements();
        make(params.edges[i].state1, n, 0);
        make(params.edges[i].state2, n, 1);
    }
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        if (layer.is_input()) continue;
        make(params.layers[l].bias_state1, plan.layers[l].n_local, 0);
        make(params.layers[l].bias_state2, plan.layers[l].n_local, 1);
    }
    if (fresh) params.optimizer_steps = 0;
}

int Network::Impl::find_parameter(const std::string& name, bool* is_bias) const {
    if (name.rfind("bias:", 0) == 0) {
        auto it = graph.layer_index.find(name.substr(5));
        if (it != graph.layer_index.end() && !graph.layers[it->second].is_input()) {
            *is_bias = true;
            return it->second;
        }
    } else if (name.rfind("weight:", 0) == 0) {
        for (const GraphEdge& w : graph.edges) {
            if (weight_name(w) == name) {
                *is_bias = false;
                return w.owner;
            }
        }
    }
    throw Error(ErrorCategory::kUsage, "unknown parameter '" + name + "'");
}

std::string Network::Impl::weight_name(const GraphEdge& w) const {
    return "weight:" + graph.layers[w.source].config.name + "->" +
           graph.layers[w.destination].config.name;
}

std::vector<float> Network::Impl::weight_gradient(int wi) {
    materialize_gradients();
    const engine::EdgeBuffers& g = buffers.edges[wi];
    const engine::EdgeSplit& block = plan.edges[wi];
    std::vector<float> dense(size_t(block.local_rows) * block.local_cols, 0.0f);
    if (!g.grad_ready) return dense;
    if (block.dense_grad) {
        download_rows(g.grad, block.ld, 0, block.local_rows, block.local_cols, dense.data());
        return dense;
    }
    uint32_t n = 0;
    g.sparse_count.download(&n, 1);
    std::vector<uint32_t> rows(n);
    const size_t cols = block.local_cols;
    std::vector<float> values(size_t(n) * cols);
    if (n > 0) {
        g.sparse_rows.download(rows.data(), n);
        g.sparse_values.download(values.data(), values.size());
    }
    for (uint32_t i = 0; i < n; ++i) {
        std::copy(values.begin() + size_t(i) * cols, values.begin() + size_t(i + 1) * cols,
                  dense.begin() + size_t(rows[i]) * cols);
    }
    return dense;
}

void Network::Impl::upload_rows(DeviceArray<float>& buffer, size_t ld, size_t first, size_t count,
                                size_t cols, const float* packed) const {
    if (count == 0 || cols == 0) return;
    if (ld == cols) {
        backend->upload(buffer.data() + first * ld, packed, count * cols * sizeof(float));
        return;
    }
    // By blocks of rows: a whole padded copy of an item-item matrix (FixedWeights: 6.7 GB for
    // Gowalla's 40,981 items) would double the host memory of the transfer.
    const size_t block = std::max<size_t>(1, kStagingRowFloats / ld);
    std::vector<float> rows(std::min(count, block) * ld, 0.0f);
    for (size_t r0 = 0; r0 < count; r0 += block) {
        const size_t n = std::min(block, count - r0);
        for (size_t r = 0; r < n; ++r)
            std::copy_n(packed + (r0 + r) * cols, cols, rows.data() + r * ld);
        backend->upload(buffer.data() + (first + r0) * ld, rows.data(), n * ld * sizeof(float));
    }
}

void Network::Impl::download_rows(const DeviceArray<float>& buffer, size_t ld, size_t first,
                                  size_t count, size_t cols, float* packed) const {
    if (count == 0 || cols == 0) return;
    if (ld == cols) {
        backend->download(packed, buffer.data() + first * ld, count * cols * sizeof(float));
        return;
    }
    const size_t block = std::max<size_t>(1, kStagingRowFloats / ld);
    std::vector<float> rows(std::min(count, block) * ld);
    for (size_t r0 = 0; r0 < count; r0 += block) {
        const size_t n = std::min(block, count - r0);
        backend->download(rows.data(), buffer.data() + (first + r0) * ld, n * ld * sizeof(float));
        for (size_t r = 0; r < n; ++r)
            std::copy_n(rows.data() + r * ld, cols, packed + (r0 + r) * cols);
    }
}

// ---- blocks of a split network ----

namespace {

// Every rank's `local` (count_of(rank) floats, at most `block` of them) gathered on every rank:
// [ranks * block] host floats, rank r's values first in its block.
std::vector<float> all_gather_blocks(Backend& backend, Communicator& comm,
                                     const std::vector<float>& local, size_t block) {
    const size_t ranks = size_t(comm.size());
    DeviceArray<float> send(backend, std::max<size_t>(block, 1), "gathered block");
    DeviceArray<float> recv(backend, std::max<size_t>(ranks * block, 1), "gathered blocks");
    if (!local.empty()) send.upload(local.data(), local.size());
    comm.all_gather(send.data(), recv.data(), block, CommType::kFloat32);
    std::vector<float> all(ranks * block);
    if (!all.empty()) recv.download(all.data(), all.size());
    return all;
}

}  // namespace

std::vector<float> Network::Impl::assemble_weight(int wi, std::vector<float> local) const {
    const GraphEdge& w = graph.edges[wi];
    const engine::Split split = plan.edges[wi].split;
    if (split == engine::Split::kNone) return local;
    const bool by_output = split == engine::Split::kByOutput;
    const int banded = by_output ? w.destination : w.source;
    const uint32_t banded_n = graph.layers[banded].n, banded_cap = plan.layers[banded].cap;
    const size_t block = by_output ? size_t(w.rows) * banded_cap : size_t(banded_cap) * w.cols;
    const std::vector<float> all = all_gather_blocks(*backend, *plan.comm, local, block);
    std::vector<float> whole(size_t(w.rows) * w.cols);
    for (int r = 0; r < plan.ranks; ++r) {
        const engine::Band b = engine::band_of(banded_n, plan.ranks, r);
        const float* src = all.data() + size_t(r) * block;
        if (by_output) {  // [rows, b.count] -> columns b.offset.. of every row
            for (size_t i = 0; i < w.rows; ++i) {
                std::copy(src + i * b.count, src + (i + 1) * b.count,
                          whole.begin() + i * w.cols + b.offset);
            }
        } else {  // [b.count, cols] -> rows b.offset..
            std::copy(src, src + size_t(b.count) * w.cols,
                      whole.begin() + size_t(b.offset) * w.cols);
        }
    }
    return whole;
}

void Network::Impl::stream_weight_rows(int wi, const DeviceArray<float>& values,
                                       const RowSink& on_rows) const {
    const GraphEdge& w = graph.edges[wi];
    const engine::EdgeSplit& mine_block = plan.edges[wi];
    const int ranks = plan.ranks;
    if (mine_block.split == engine::Split::kNone) {
        // Whole on this rank (every rank of a data-parallel job holds the same values).
        if (plan.job_rank != 0) return;
        const size_t chunk = std::max<size_t>(1, file_chunk_floats / w.cols);
        std::vector<float> host(std::min<size_t>(chunk, w.rows) * w.cols);
        // download_rows adds a padded copy of the chunk where ld > cols.
        const size_t padded = mine_block.ld == w.cols ? 0 : host.size() / w.cols * mine_block.ld;
        file_chunk_peak = std::max(file_chunk_peak, host.size() + padded);
        for (size_t first = 0; first < w.rows; first += chunk) {
            const size_t count = std::min<size_t>(chunk, w.rows - first);
            download_rows(values, mine_block.ld, first, count, w.cols, host.data());
            on_rows(first, count, host.data());
        }
        return;
    }
    const bool by_output = mine_block.split == engine::Split::kByOutput;
    const int banded = by_output ? w.destination : w.source;
    const uint32_t banded_n = graph.layers[banded].n, banded_cap = plan.layers[banded].cap;
    // Chunks of rows (by output: rows of every block; by input: the i-th rows of every rank's
    // band) of about file_chunk_floats at the root, which passes each on and keeps none.
    const size_t width = by_output ? banded_cap : w.cols;  // padded floats per row of a block
    const size_t rows_per_rank = by_output ? w.rows : banded_cap;
    const size_t chunk = std::min<size_t>(
        rows_per_rank, std::max<size_t>(1, file_chunk_floats / (width * size_t(ranks))));
    const bool root = plan.rank == 0;
    DeviceArray<float> send(*backend, chunk * width, "save chunk");
    DeviceArray<float> recv(*backend, root ? chunk * width * ranks : 1, "save chunks");
    std::vector<float> host(root ? chunk * width * ranks : 0);
    // By output: the chunk's rows assembled from every rank's columns.
    std::vector<float> rows(root && by_output ? chunk * w.cols : 0);
    file_chunk_peak =
        std::max(file_chunk_peak, send.size() + recv.size() + host.size() + rows.size());
    for (size_t first = 0; first < rows_per_rank; first += chunk) {
        const size_t count = std::min(chunk, rows_per_rank - first);
        // This rank's rows [first, first + count) of its block (fewer at the end of a band).
        const size_t local_rows = mine_block.local_rows, local_cols = mine_block.local_cols;
        const size_t mine = std::min<size_t>(count, local_rows > first ? local_rows - first : 0);
        // Chunks travel packed: rows of a padded block are repacked into `send`.
        if (mine > 0 && mine_block.ld == local_cols) {
            backend->copy(send.data(), values.data() + first * local_cols,
                          mine * local_cols * sizeof(float));
        } else if (mine > 0) {
            backend->add_matrix(1.0f,
                                ConstMatrixView(values.data() + first * mine_block.ld, mine,
                                                local_cols, mine_block.ld),
                                0.0f, MatrixView{send.data(), mine, local_cols, local_cols});
        }
        plan.comm->gather(send.data(), recv.data(), count * width, CommType::kFloat32, 0);
        if (!root) continue;
        recv.download(host.data(), count * width * ranks);
        for (int r = 0; r < ranks; ++r) {
            const engine::Band b = engine::band_of(banded_n, ranks, r);
            const float* src = host.data() + size_t(r) * count * width;
            if (by_output) {  // rows first.., columns of band b
                for (size_t i = 0; i < count; ++i) {
                    std::copy(src + i * b.count, src + (i + 1) * b.count,
                              rows.begin() + i * w.cols + b.offset);
                }
            } else if (first < b.count) {  // rows b.offset + first.. of the matrix
                on_rows(b.offset + first, std::min<size_t>(count, b.count - first), src);
            }
        }
        if (by_output) on_rows(first, count, rows.data());
    }
}

std::vector<float> Network::Impl::assemble_bias(int l, std::vector<float> local) const {
    if (!plan.split()) return local;
    const uint32_t n = graph.layers[l].n, cap = plan.layers[l].cap;
    const std::vector<float> all = all_gather_blocks(*backend, *plan.comm, local, cap);
    std::vector<float> whole(n);
    for (int r = 0; r < plan.ranks; ++r) {
        const engine::Band b = engine::band_of(n, plan.ranks, r);
        std::copy(all.begin() + size_t(r) * cap, all.begin() + size_t(r) * cap + b.count,
                  whole.begin() + b.offset);
    }
    return whole;
}

std::vector<float> Network::Impl::weight_block(int wi, const std::vector<float>& whole) const {
    const uint32_t cols = graph.edges[wi].cols;
    const engine::EdgeSplit& mine = plan.edges[wi];
    if (mine.split == engine::Split::kNone) return whole;
    std::vector<float> block(size_t(mine.local_rows) * mine.local_cols);
    for (size_t i = 0; i < mine.local_rows; ++i) {
        const auto from = whole.begin() + (mine.row_offset + i) * cols + mine.col_offset;
        std::copy(from, from + mine.local_cols, block.begin() + i * mine.local_cols);
    }
    return block;
}

std::vector<float> Network::Impl::bias_block(int l, const std::vector<float>& whole) const {
    const engine::LayerBand& band = plan.layers[l];
    return std::vector<float>(whole.begin() + band.offset,
                              whole.begin() + band.offset + band.n_local);
}

// ---- Network ----

Network::Network(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;
Network::~Network() = default;

namespace {
// A network's structure and (uninitialised) parameters: create() then draws them, load() reads
// them from the file.
template <class Impl>
std::unique_ptr<Impl> allocated_network(const NetworkConfig& config,
                                        const std::map<std::string, uint32_t>& dataset_widths,
                                        const NetworkOptions& options, bool loading) {
    auto impl = std::make_unique<Impl>();
    impl->graph.config = config;
    impl->options = options;
    // Under mpirun "auto" and "cuda" take the rank's own GPU (comm/node_rank.h).
    impl->backend = make_backend(options.device, options.threads,
                                 rank_default_gpu(options.device, options.share_gpus));
    if (options.precision) {
        impl->backend->set_precision(*options.precision);
    } else if (config.training && config.training->precision) {
        impl->backend->set_precision(*config.training->precision);
    }  // else the backend's default: SPARSENET_CUDA_TF32 or tf32 on CUDA, fp32 on the CPU
    impl->plan.comm = make_communicator(to_string(options.comm), *impl->backend);
    impl->build(dataset_widths);  // resolves "auto" sizes in impl->config
    if (loading) {
        if (options.load.chunk_floats > 0) impl->file_chunk_floats = options.load.chunk_floats;
        impl->choose_kept(options.load);
    }
    impl->allocate_parameters();
    return impl;
}
}  // namespace

Network Network::create(const NetworkConfig& config,
                        const std::map<std::string, uint32_t>& dataset_widths,
                        const NetworkOptions& options) {
    return host_memory_guard("creating a network", [&] {
        auto impl = allocated_network<Impl>(config, dataset_widths, options, false);
        impl->initialize_weights(options.seed);
        return Network(std::move(impl));
    });
}

void prepare_device(const std::string& device, bool share_gpus) {
    try {
        prepare_backend_device(device, rank_default_gpu(device, share_gpus));
    } catch (...) {  // never throws: the load reports the device's errors
    }
}

Network Network::load(const std::string& path, const NetworkOptions& options) {
    return host_memory_guard("loading a model", [&] {
        const io::ModelReader file(path);  // the layout only: each rank reads its blocks below
        std::map<std::string, uint32_t> widths;
        for (const LayerConfig& layer : file.layout().config.layers) {
            if (layer.kind != LayerKind::kHidden) widths[layer.dataset] = layer.n;
        }
        auto impl = allocated_network<Impl>(file.layout().config, widths, options, true);
        impl->initialize_biases();  // restore reads every owned matrix and the file's biases
        impl->restore(file, /*with_state=*/false);
        return Network(std::move(impl));
    });
}

io::ModelLayout Network::Impl::model_layout(const io::ModelTrainingState* training) const {
    io::ModelLayout layout;
    layout.config = graph.config;
    layout.feature_names = graph.feature_names;
    if (training != nullptr) layout.training = *training;
    const int slots = training != nullptr ? formulas::optimizer_state_slots(params.state_kind) : 0;
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        const GraphEdge& w = graph.edges[i];
        io::ModelLayout::Weight mw;
        mw.input_layer = graph.layers[w.source].config.name;
        mw.output_layer = graph.layers[w.destination].config.name;
        mw.rows = w.rows;
        mw.cols = w.cols;
        if (w.owner != static_cast<int>(i)) {  // stored once, with its owner
            const GraphEdge& owner = graph.edges[w.owner];
            mw.shared = true;
            mw.transposed = w.transposed;
            mw.source_input_layer = graph.layers[owner.source].config.name;
            mw.source_output_layer = graph.layers[owner.destination].config.name;
        } else {
            mw.state_slots = w.fixed ? 0 : slots;  // a fixed matrix has no optimizer state
        }
        layout.weights.push_back(std::move(mw));
    }
    for (const GraphLayer& layer : graph.layers) {
        if (!layer.is_input()) layout.biases.push_back({layer.config.name, layer.n, slots});
    }
    return layout;
}

std::string Network::Impl::nonfinite_parameters() const {
    // Each rank counts its block of a split parameter; a replicated one (data parallelism) is
    // counted on rank 0 only, so that the sum over the ranks counts every value once.
    const bool counts = plan.split() || plan.job_rank == 0;
    std::vector<std::string> names;
    std::vector<double> bad;
    auto add = [&](const std::string& name, const DeviceArray<float>& values) {
        names.push_back(name);
        bad.push_back(counts ? double(count_nonfinite(*backend, values, file_chunk_floats)) : 0.0);
    };
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        if (graph.edges[i].owner == static_cast<int>(i)) {
            add(weight_name(graph.edges[i]), params.edges[i].w);
        }
    }
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        if (!layer.is_input()) add("bias:" + layer.config.name, params.layers[l].bias);
    }
    if (plan.job_ranks > 1) {
        DeviceArray<double> sums(*backend, bad.size(), "finite check");
        sums.upload(bad.data(), bad.size());
        plan.comm->all_reduce(sums.data(), bad.size(), CommType::kFloat64, CommOp::kSum);
        sums.download(bad.data(), bad.size());
    }
    for (size_t k = 0; k < bad.size(); ++k) {
        if (bad[k] > 0) {
            return std::to_string(uint64_t(bad[k])) + " values of " + names[k] +
                   " are NaN or infinite";
        }
    }
    return "";
}

void Network::Impl::write_file(const std::string& path,
                               const io::ModelTrainingState* training) const {
    // Rank 0 writes; its first failure is kept and the writes after it are skipped, while the
    // gathers that feed them go on, so that no rank is left waiting in a collective.
    const bool root = plan.job_rank == 0;
    std::optional<Error> failure;
    std::optional<io::ModelWriter> file;
    auto attempt = [&](const std::function<void()>& write) {
        if (!root || failure) return;
        try {
            write();
        } catch (const Error& e) {
            failure.emplace(e);
        }
    };
    attempt([&] { file.emplace(path, model_layout(training)); });
    const int slots = training != nullptr ? formulas::optimizer_state_slots(params.state_kind) : 0;
    for (size_t i = 0; i < graph.edges.size(); ++i) {
        const GraphEdge& w = graph.edges[i];
        if (w.owner != static_cast<int>(i)) continue;  // stored with its owner
        for (int s = 0; s <= (w.fixed ? 0 : slots); ++s) {
            stream_weight_rows(
                int(i), weight_slot(params.edges[i], s),
                [&](uint64_t first, uint64_t count, const float* values) {
                    attempt([&] { file->write_rows(i, io::ModelSlot(s), first, count, values); });
                });
        }
    }
    size_t bias = 0;  // the file's bias index: one per non-input layer
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        if (layer.is_input()) continue;
        for (int s = 0; s <= slots; ++s) {
            std::vector<float> local(plan.layers[l].n_local);
            bias_slot(params.layers[l], s).download(local.data(), local.size());
            const std::vector<float> whole = assemble_bias(int(l), std::move(local));
            attempt([&] { file->write_bias(bias, io::ModelSlot(s), whole.data()); });
        }
        ++bias;
    }
    attempt([&] { file->commit(); });
    // Every rank learns whether rank 0 succeeded.
    uint32_t failed = failure ? 1 + static_cast<uint32_t>(failure->category()) : 0;
    if (plan.job_ranks > 1) {
        DeviceArray<uint32_t> flag(*backend, 1, "save status");
        flag.upload(&failed, 1);
        plan.comm->broadcast(flag.data(), 1, CommType::kUint32, 0);
        flag.download(&failed, 1);
    }
    if (failure) throw *failure;
    if (failed) {
        throw Error(static_cast<ErrorCategory>(failed - 1), path + ": rank 0 failed to write it");
    }
}

void Network::save(const std::string& path) const {
    impl_->require_fp32_weights("saving " + path);
    impl_->catch_up_all();
    host_memory_guard("saving a model", [&] { impl_->write_file(path, nullptr); });
}

const NetworkConfig& Network::config() const {
    return impl_->graph.config;
}
uint64_t Network::device_free_memory() const {
    return impl_->backend->free_memory();
}

std::string Network::device() const {
    return impl_->backend->name();
}
Precision Network::precision() const {
    return impl_->backend->precision();
}
void Network::keep_only_bf16_weights() {
    Impl& net = *impl_;
    if (net.backend->precision() != Precision::kBf16) {
        throw Error(ErrorCategory::kUsage,
                    std::string("keeping only the BF16 weights needs precision bf16; the "
                                "network computes in ") +
                        to_string(net.backend->precision()));
    }
    net.catch_up_all();
    for (size_t wi = 0; wi < net.graph.edges.size(); ++wi) {
        engine::EdgeParams& matrix = net.params.edges[wi];
        if (matrix.w_bf16.size() == 0) continue;  // no copy: csr_matmul alone, or not an owner
        bool gemm_only = true;
        for (const GraphEdge& w : net.graph.edges) {
            if (w.owner == int(wi) && net.graph.layers[w.source].is_input()) gemm_only = false;
        }
        if (!gemm_only) continue;
        matrix.w = DeviceArray<float>();
        matrix.state1 = DeviceArray<float>();
        matrix.state2 = DeviceArray<float>();
        net.params.bf16_only = true;
    }
}

size_t Network::keep_bf16_input_weights() {
    Impl& net = *impl_;
    if (net.backend->name() != "cpu") {
        throw Error(ErrorCategory::kUsage,
                    "keeping the input layer's weights in BF16 needs the CPU backend; the "
                    "network runs on '" +
                        net.backend->name() + "'");
    }
    net.catch_up_all();
    size_t freed = 0;
    for (size_t wi = 0; wi < net.graph.edges.size(); ++wi) {
        engine::EdgeParams& matrix = net.params.edges[wi];
        if (net.graph.edges[wi].owner != int(wi) || !net.sparse_only_matrix(int(wi))) continue;
        const size_t n = net.plan.edges[wi].elements();
        if (matrix.kept == engine::Kept::kBf16Only) {  // loaded so (LoadOptions): never FP32
            freed += n * (sizeof(float) - sizeof(uint16_t));
            continue;
        }
        if (matrix.w.size() == 0) continue;
        if (matrix.w_bf16.size() != n)
            matrix.w_bf16 = DeviceArray<uint16_t>(*net.backend, n, "BF16 input weights");
        net.backend->round_bf16(net.matrix_rows(matrix.w, int(wi)), matrix.w_bf16.data());
        freed += n * (sizeof(float) - sizeof(uint16_t));
        matrix.w = DeviceArray<float>();
        matrix.state1 = DeviceArray<float>();
        matrix.state2 = DeviceArray<float>();
        net.params.bf16_only = true;
    }
    return freed;
}

bool Network::only_bf16_weights() const {
    return impl_->params.bf16_only;
}

void Network::set_precision(Precision p) {
    impl_->require_fp32_weights("changing the precision");
    impl_->backend->set_precision(p);
    impl_->sync_bf16_copies();  // allocated in kBf16, freed otherwise
}
int Network::rank() const {
    return impl_->plan.job_rank;
}
int Network::ranks() const {
    return impl_->plan.job_ranks;
}
std::string Network::parallel() const {
    if (impl_->plan.job_ranks == 1) return "none";
    return impl_->plan.data_parallel ? "data" : "model";
}

uint32_t Network::layer_size(const std::string& layer) const {
    auto it = impl_->graph.layer_index.find(layer);
    if (it == impl_->graph.layer_index.end()) {
        throw Error(ErrorCategory::kUsage, "unknown layer '" + layer + "'");
    }
    return impl_->graph.layers[it->second].n;
}

const std::vector<std::string>& Network::feature_names(const std::string& layer) const {
    layer_size(layer);  // Error(kUsage) for an unknown layer
    static const std::vector<std::string> none;
    const auto it = impl_->graph.feature_names.find(layer);
    return it == impl_->graph.feature_names.end() ? none : it->second;
}

void Network::set_feature_names(const std::string& layer, std::vector<std::string> names) {
    const uint32_t n = layer_size(layer);
    if (names.size() > n) {
        throw Error(ErrorCategory::kUsage, "layer '" + layer + "' has " + std::to_string(n) +
                                               " units; " + std::to_string(names.size()) +
                                               " feature names given");
    }
    if (names.empty()) {
        impl_->graph.feature_names.erase(layer);
    } else {
        impl_->graph.feature_names[layer] = std::move(names);
    }
}

std::vector<Parameter> Network::parameters() const {
    std::vector<Parameter> params;
    for (size_t i = 0; i < impl_->graph.edges.size(); ++i) {
        const GraphEdge& w = impl_->graph.edges[i];
        // A shared matrix is one parameter, named after its owner edge.
        if (w.owner == static_cast<int>(i))
            params.push_back({impl_->weight_name(w), w.rows, w.cols});
    }
    for (const GraphLayer& layer : impl_->graph.layers) {
        if (!layer.is_input()) params.push_back({"bias:" + layer.config.name, 1, layer.n});
    }
    return params;
}

std::vector<float> Network::get_parameter(const std::string& name) const {
    impl_->catch_up_all();
    bool is_bias = false;
    const int i = impl_->find_parameter(name, &is_bias);
    if (is_bias) {
        std::vector<float> values(impl_->params.layers[i].bias.size());
        impl_->params.layers[i].bias.download(values.data(), values.size());
        return impl_->assemble_bias(i, std::move(values));
    }
    impl_->require_fp32_weights("parameter '" + name + "'", i);
    const engine::EdgeSplit& block = impl_->plan.edges[i];
    std::vector<float> values(size_t(block.local_rows) * block.local_cols);
    impl_->download_rows(impl_->params.edges[i].w, block.ld, 0, block.local_rows, block.local_cols,
                         values.data());
    return impl_->assemble_weight(i, std::move(values));
}

void Network::set_parameter(const std::string& name, const std::vector<float>& values) {
    impl_->catch_up_all();
    bool is_bias = false;
    const int i = impl_->find_parameter(name, &is_bias);
    if (!is_bias) impl_->require_fp32_weights("parameter '" + name + "'", i);
    DeviceArray<float>& dst = is_bias ? impl_->params.layers[i].bias : impl_->params.edges[i].w;
    const size_t whole = is_bias ? size_t(impl_->graph.layers[i].n)
                                 : size_t(impl_->graph.edges[i].rows) * impl_->graph.edges[i].cols;
    if (values.size() != whole) {
        throw Error(ErrorCategory::kData, "parameter '" + name + "' has " + std::to_string(whole) +
                                              " values; given " + std::to_string(values.size()));
    }
    if (is_bias) {
        const std::vector<float> band = impl_->bias_block(i, values);
        dst.upload(band.data(), band.size());
        return;
    }
    const engine::EdgeSplit& block = impl_->plan.edges[i];
    const std::vector<float> mine = impl_->weight_block(i, values);
    impl_->upload_rows(dst, block.ld, 0, block.local_rows, block.local_cols, mine.data());
    impl_->refresh_bf16_copy(i);
}

}  // namespace sparsenet
