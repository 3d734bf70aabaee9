// The network's training part (network_training.h).
#include "engine/network_training.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "engine/linear_fit.h"
#include "engine/network_impl.h"

namespace sparsenet::engine {

namespace {

// The values of a[0, n) that are NaN, infinite, or (with a limit) larger than it in magnitude.
size_t count_nonfinite(const DeviceArray<float>& a, size_t n,
                       float limit = std::numeric_limits<float>::infinity()) {
    if (n == 0) return 0;
    std::vector<float> host(n);
    a.download(host.data(), n);
    return size_t(std::count_if(host.begin(), host.end(), [&](float v) {
        return !std::isfinite(v) || std::fabs(v) > limit;
    }));
}

// The non-input layers in forward order: the guard's layout.
std::vector<int> checked_layer_indices(const Network::Impl& net) {
    std::vector<int> out;
    for (int l : net.graph.order)
        if (!net.graph.layers[l].is_input()) out.push_back(l);
    return out;
}

}  // namespace

Training::Training(Network& network) : net_(network.impl()) {
    net_.require_fp32_weights("training");
}

Backend& Training::backend() const {
    return *net_.backend;
}
Communicator& Training::comm() const {
    return *net_.plan.comm;
}
int Training::job_rank() const {
    return net_.plan.job_rank;
}
int Training::job_ranks() const {
    return net_.plan.job_ranks;
}
bool Training::data_parallel() const {
    return net_.plan.data_parallel;
}
bool Training::split() const {
    return net_.plan.split();
}
const NetworkConfig& Training::config() const {
    return net_.graph.config;
}

void Training::reserve(size_t rows, size_t input_nnz) {
    net_.ensure_batch_capacity(rows);
    net_.ensure_sparse_capacity(input_nnz);
}

void Training::ensure_optimizer_state(OptimizerKind kind) {
    net_.ensure_optimizer_state(kind);
}

size_t Training::share_of(const BatchRows& batch) const {
    if (!net_.plan.data_parallel) return batch.batch;
    const size_t P = size_t(net_.plan.job_ranks), r = size_t(net_.plan.job_rank);
    return batch.batch * (r + 1) / P - batch.batch * r / P;
}

void Training::compute_batch_gradients(const Bindings& data, const BatchRows& batch,
                                       uint64_t mask_seed, double* loss_sum) {
    // The switches off: the passes of before (the A/B of docs/benchmarks.md and the tests that
    // compare both).
    const StepSwitches& switches = net_.options.switches;
    net_.buffers.fuse_output_epilogue = switches.fused_epilogue;
    if (!net_.plan.data_parallel) {
        net_.forward(data, batch, true, mask_seed);
        // The dense weight gradients go into update()'s GEMMs.
        net_.buffers.defer_dense_grads = switches.fused_update;
        net_.buffers.defer_sparse_grads = switches.fused_sparse_step;
        net_.backward(data, batch, true, mask_seed, loss_sum);
        net_.buffers.defer_dense_grads = false;
        net_.buffers.defer_sparse_grads = false;
        net_.buffers.fuse_output_epilogue = false;
        return;
    }
    // This rank's share of the batch; the gradients of every share are summed.
    const size_t P = size_t(net_.plan.job_ranks), r = size_t(net_.plan.job_rank);
    const size_t lo = batch.batch * r / P, hi = batch.batch * (r + 1) / P;
    const BatchRows share{batch.rows + lo, 0, hi - lo};
    net_.buffers.loss_batch = batch.batch;
    if (share.batch > 0) {
        net_.forward(data, share, true, mask_seed);
        net_.backward(data, share, true, mask_seed, loss_sum);
    } else {
        net_.zero_gradients();
    }
    net_.buffers.fuse_output_epilogue = false;
    net_.buffers.loss_batch = 0;
    net_.all_reduce_gradients();
}

void Training::update(const OptimizerOptions& optimizer, float decay) {
    net_.update(optimizer, decay);
}

void Training::add_losses(const Bindings& data, const BatchRows& rows, double* loss_sum) {
    net_.forward(data, rows, false, 0);
    net_.add_losses(data, rows, loss_sum);
}

std::map<std::string, std::vector<float>> Training::parameter_gradients(const Bindings& data,
                                                                        const BatchRows& rows) {
    net_.forward(data, rows, false, 0);
    net_.backward(data, rows, false, 0, nullptr);
    std::map<std::string, std::vector<float>> grads;
    for (size_t wi = 0; wi < net_.graph.edges.size(); ++wi) {
        const GraphEdge& w = net_.graph.edges[wi];
        if (w.owner != static_cast<int>(wi)) continue;  // a shared matrix: one entry, its owner's
        if (w.fixed) continue;                          // not a trained parameter
        grads[net_.weight_name(w)] =
            net_.assemble_weight(static_cast<int>(wi), net_.weight_gradient(static_cast<int>(wi)));
    }
    for (size_t l = 0; l < net_.graph.layers.size(); ++l) {
        const GraphLayer& layer = net_.graph.layers[l];
        if (layer.is_input()) continue;
        std::vector<float> g(net_.plan.layers[l].n_local, 0.0f);
        if (layer.reaches_output) net_.buffers.layers[l].bias_grad.download(g.data(), g.size());
        grads["bias:" + layer.config.name] = net_.assemble_bias(static_cast<int>(l), std::move(g));
    }
    return grads;
}

bool Training::fits_pending() const {
    return net_.params.fits_pending;
}

// matrix [rows, cols] (row stride ld) += packed host rows, by blocks of rows staged on the
// device: no second whole matrix beside the edge's (Gowalla's item-item matrix is 6.7 GB).
void Training::add_rows(DeviceArray<float>& matrix, size_t ld, size_t rows, size_t cols,
                        const float* packed) {
    const size_t block = std::max<size_t>(1, Network::Impl::kStagingRowFloats / ld);
    DeviceArray<float> staged(*net_.backend, std::min(rows, block) * ld, "fixed weights sum");
    for (size_t r0 = 0; r0 < rows; r0 += block) {
        const size_t n = std::min(block, rows - r0);
        net_.upload_rows(staged, ld, 0, n, cols, packed + r0 * cols);
        net_.backend->add_matrix(1.0f, {staged.data(), n, cols, ld}, 1.0f,
                                 {matrix.data() + r0 * ld, n, cols, ld});
    }
}

void Training::fit_fixed_weights(const std::map<std::string, const Dataset*>& datasets) {
    for (size_t wi = 0; wi < net_.graph.edges.size(); ++wi) {
        const GraphEdge& w = net_.graph.edges[wi];
        if (!w.fixed) continue;
        const GraphLayer& source = net_.graph.layers[w.source];
        const GraphLayer& destination = net_.graph.layers[w.destination];
        const auto it = datasets.find(source.config.dataset);
        if (it == datasets.end() || it->second == nullptr) {
            throw Error(ErrorCategory::kInternal, "fit of " + net_.weight_name(w) +
                                                      ": no training data '" +
                                                      source.config.dataset + "'");
        }
        // The rows as stored (Normalize scales what the edge multiplies, not what it is fitted on);
        // an entry with Indicator fits on their 0/1 pattern.
        const Dataset x = it->second->expanded();
        std::optional<Dataset> pattern;  // made when an entry asks for it
        auto rows_for = [&](const FixedWeights& fw) -> const Dataset& {
            if (!fw.indicator || x.is_boolean()) return x;
            if (!pattern) {
                pattern = x;
                pattern->values.clear();
            }
            return *pattern;
        };
        // Entries of one source are summed into the edge's one matrix (a blend of linear paths,
        // each with its own Scale): the first is uploaded, the others added to it.
        bool first = true;
        for (const FixedWeights& fw : destination.config.fixed_weights) {
            if (fw.source != source.config.name) continue;
            std::vector<float> b;
            if (fw.fit == LinearFit::kEase) {
                b = ease_matrix(rows_for(fw), fw.lambda, fw.scale);
            } else {
                GraphFilterFit gf;
                gf.k = fw.k;
                gf.ideal_weight = fw.ideal_weight;
                gf.user_exponent = fw.user_exponent;
                gf.item_exponent = fw.item_exponent;
                b = graph_filter_matrix(rows_for(fw), gf, fw.scale);
            }
            penalize_popularity(b, rows_for(fw), fw.popularity_exponent);
            // The whole matrix: fixed edges are never split.
            const EdgeSplit& block = net_.plan.edges[wi];
            if (first) {
                net_.upload_rows(net_.params.edges[wi].w, block.ld, 0, block.local_rows,
                                 block.local_cols, b.data());
            } else {
                add_rows(net_.params.edges[wi].w, block.ld, block.local_rows, block.local_cols,
                         b.data());
            }
            first = false;
        }
        net_.refresh_bf16_copy(int(wi));
    }
    net_.params.fits_pending = false;
}

size_t Training::checked_layers() const {
    return checked_layer_indices(net_).size();
}

const std::string& Training::checked_layer_name(size_t k) const {
    return net_.graph.layers[checked_layer_indices(net_).at(k)].config.name;
}

bool Training::local_gradients_nonfinite() {
    if (guard_.size() < net_.graph.layers.size()) {
        guard_ = DeviceArray<float>(*net_.backend, net_.graph.layers.size(), "finite check");
    }
    size_t k = 0;
    for (size_t l = 0; l < net_.graph.layers.size(); ++l) {
        const GraphLayer& layer = net_.graph.layers[l];
        const uint32_t n_local = net_.plan.layers[l].n_local;
        if (layer.is_input() || !layer.reaches_output || n_local == 0) continue;
        net_.backend->row_sum_squares(
            {net_.buffers.layers[l].bias_grad.data(), 1, n_local, n_local}, guard_.data() + k++);
    }
    std::vector<float> norms(k);
    if (k > 0) guard_.download(norms.data(), k);
    return std::any_of(norms.begin(), norms.end(), [](float v) { return !std::isfinite(v); });
}

void Training::record_health(float* f, size_t rows) const {
    // Per checked layer: its bias gradient (0 where no gradient reaches it), the activations of
    // the batch's rows and its bias; empty parts give 0. One op for all. An output layer's
    // activations are checked through the row norms its output_delta wrote (the sum of their
    // squares is the activations' sum of squares, rounded): 7M of the 7.8M values a
    // dsstne-bench step checked, 28.5 us of a step on an H100 (2026-11-28), now a pass less.
    std::vector<ConstMatrixView> parts;
    for (int l : checked_layer_indices(net_)) {
        const GraphLayer& layer = net_.graph.layers[l];
        const LayerBuffers& buf = net_.buffers.layers[l];
        const LayerBand& band = net_.plan.layers[l];
        const size_t n = band.n_local;
        parts.emplace_back(buf.bias_grad.data(), layer.reaches_output ? 1 : 0, n, n);
        if (layer.is_output()) {
            const size_t norm_rows = std::min(rows, buf.act_norms.size());
            parts.emplace_back(buf.act_norms.data(), 1, norm_rows, norm_rows);
        } else {
            const size_t act_rows = std::min(rows, band.ld == 0 ? 0 : buf.act.size() / band.ld);
            parts.emplace_back(buf.act.data(), act_rows, n, band.ld);
        }
        parts.emplace_back(net_.params.layers[l].bias.data(), 1, n, n);
    }
    net_.backend->sum_squares(parts, f);
}

std::string Training::locate_nonfinite(size_t batch) const {
    net_.materialize_gradients();  // the search reads the weight gradients
    const Network::Impl& net = net_;
    const uint32_t none = UINT32_MAX;
    const uint32_t per_pass = uint32_t(net.graph.order.size() * 3);
    // pass * per_pass + order position * 3 + what: pass 0 (0 weights, 1 bias, 2 activations),
    // pass 1 (0 weight gradient, 1 bias gradient); the job-wide minimum is the first.
    uint32_t code = none;
    std::string detail;
    const auto of = [](size_t bad, size_t n) {
        return std::to_string(bad) + " of this rank's " + std::to_string(n) + " values";
    };
    for (uint32_t pass = 0; pass < 2 && code == none; ++pass) {
        for (size_t k = 0; k < net.graph.order.size() && code == none; ++k) {
            const GraphLayer& layer = net.graph.layers[net.graph.order[k]];
            if (layer.is_input()) continue;
            const uint32_t n_local = net.plan.layers[net.graph.order[k]].n_local;
            const LayerBuffers& buf = net.buffers.layers[net.graph.order[k]];
            const uint32_t at = pass * per_pass + uint32_t(k * 3);
            for (int wi : layer.in_weights) {
                const int owner = net.graph.edges[wi].owner;
                const GraphEdge& w = net.graph.edges[owner];
                const DeviceArray<float>& a =
                    pass == 0 ? net.params.edges[owner].w : net.buffers.edges[owner].grad;
                if (pass == 1 && !net.plan.edges[owner].dense_grad) continue;  // row-sparse
                // Padded rows: zeros in the padding, which the count leaves out.
                if (const size_t bad = count_nonfinite(a, a.size()); bad > 0) {
                    const EdgeSplit& block = net.plan.edges[owner];
                    code = at;
                    detail = of(bad, size_t(block.local_rows) * block.local_cols) + " of " +
                             net.weight_name(w);
                    break;
                }
            }
            if (code != none) break;
            if (pass == 0) {
                const DeviceArray<float>& bias = net.params.layers[net.graph.order[k]].bias;
                if (const size_t bad = count_nonfinite(bias, n_local); bad > 0) {
                    code = at + 1;
                    detail = of(bad, n_local);
                } else if (const size_t n = std::min(
                               buf.act.size(), batch * net.plan.layers[net.graph.order[k]].ld);
                           count_nonfinite(buf.act, n) > 0) {  // padded rows: zeros in the padding
                    code = at + 2;
                    detail = of(count_nonfinite(buf.act, n), batch * n_local);
                }
            } else if (layer.reaches_output && n_local > 0) {
                // Some value exceeds sqrt(FLT_MAX / n) whenever the guard's float sum of
                // squares overflowed.
                const float limit = std::sqrt(std::numeric_limits<float>::max() / float(n_local));
                const size_t bad = count_nonfinite(buf.bias_grad, n_local, limit);
                if (bad > 0) {
                    code = at + 1;
                    detail = of(bad, n_local) +
                             " are non-finite or so large that the sum of their squares "
                             "overflows";
                }
            }
        }
    }
    uint32_t first = code;
    if (net.plan.job_ranks > 1) {
        DeviceArray<uint32_t> buf(*net.backend, 1, "non-finite search");
        buf.upload(&code, 1);
        net.plan.comm->all_reduce(buf.data(), 1, CommType::kUint32, CommOp::kMin);
        buf.download(&first, 1);
    }
    if (first == none) {
        return "no parameter, activation or gradient is non-finite (the loss overflowed)";
    }
    const bool gradients = first >= per_pass;
    const GraphLayer& layer = net.graph.layers[net.graph.order[(first % per_pass) / 3]];
    const char* what[] = {"the weights into", "the bias of", "the activations of"};
    const char* what_grad[] = {"the gradient of the weights into", "the bias gradient of"};
    std::string text = std::string("the first non-finite values are in ") +
                       (gradients ? what_grad[first % 3] : what[first % 3]) + " layer '" +
                       layer.config.name + "'";
    if (first == code) text += " (" + detail + ")";
    return text;
}

std::string Training::nonfinite_parameters() const {
    net_.catch_up_all();
    return net_.nonfinite_parameters();
}

OptimizerKind Training::state_kind() const {
    return net_.params.state_kind;
}

uint64_t Training::optimizer_steps() const {
    return net_.params.optimizer_steps;
}

void Training::write_file(const std::string& path, const io::ModelTrainingState& state) const {
    // The file holds every step's result (and a resumed run starts from the same arithmetic).
    net_.catch_up_all();
    net_.write_file(path, &state);
}

void Training::catch_up_all() {
    net_.catch_up_all();
}

std::pair<uint64_t, std::string> Training::every_row_sparse_matrix(
    const OptimizerOptions& optimizer, float decay) const {
    std::pair<uint64_t, std::string> widest{0, ""};
    if (optimizer.sparse_update != SparseUpdate::kExact) return widest;
    formulas::OptimizerStep step;
    step.kind = optimizer.kind;
    step.mu = optimizer.mu;
    step.l2 = optimizer.l2;
    step.l1 = optimizer.l1;
    if (formulas::zero_gradient_is_noop(step)) return widest;
    for (size_t wi = 0; wi < net_.graph.edges.size(); ++wi) {
        const GraphEdge& w = net_.graph.edges[wi];
        if (w.owner != static_cast<int>(wi) || net_.plan.edges[wi].dense_grad) continue;
        if (net_.uses_row_clock(static_cast<int>(wi), optimizer, step, decay == 0.0f)) continue;
        if (w.rows > widest.first) widest = {w.rows, net_.weight_name(w)};
    }
    return widest;
}

void Training::restore(const io::ModelReader& file, uint64_t optimizer_steps) {
    net_.restore(file, /*with_state=*/true);
    net_.params.optimizer_steps = optimizer_steps;
}

}  // namespace sparsenet::engine
