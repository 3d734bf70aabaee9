// Forward, backward and update passes: the engine's use of the backend op table.
#include <cmath>
#include <cstdlib>

#include "engine/network_impl.h"
#include "formulas/rng.h"
#include "sparsenet/error.h"

namespace sparsenet {

using engine::GraphEdge;
using engine::GraphLayer;

namespace {

// Purposes mixed into mask seeds so that streams never collide.
constexpr uint64_t kDropoutStream = 1;
constexpr uint64_t kDenoiseStream = 2;

}  // namespace

formulas::LossParams Network::Impl::loss_params(const GraphLayer& output,
                                                const engine::DeviceDataset& targets) const {
    formulas::LossParams p;
    p.kind = graph.config.error_function;
    p.multinomial = graph.config.error_function == ErrorFunction::kCrossEntropy &&
                    output.config.activation == Activation::kSoftMax;
    p.one_target = graph.config.smce.one_target;
    p.zero_target = graph.config.smce.zero_target;
    p.one_scale = graph.config.smce.one_scale;
    p.zero_scale = graph.config.smce.zero_scale;
    p.boost_one = graph.config.delta_boost_one;
    p.boost_zero = graph.config.delta_boost_zero;
    // SparseIgnoreZero is an attribute of the target dataset in DSSTNE.
    p.ignore_zero = targets.ignore_zero();
    return p;
}

DropoutMask Network::Impl::dropout_mask(int l, const BatchRows& rows, uint64_t mask_seed) const {
    const GraphLayer& layer = graph.layers[l];
    const float p = layer.config.p_dropout;
    const uint64_t seed = formulas::derive_seed(mask_seed, uint64_t(l), kDropoutStream);
    DropoutMask mask;
    mask.rows = rows;
    mask.col_offset = plan.layers[l].offset;  // masks are keyed by global unit, whatever the split
    const formulas::ActivationParams& act = layer.activation;
    if (act.kind == Activation::kExponentialLinear) {
        mask.params = formulas::alpha_dropout(p, seed, -act.alpha);
    } else if (act.kind == Activation::kScaledExponentialLinear) {
        mask.params = formulas::alpha_dropout(p, seed, -act.lambda * act.alpha);
    } else {
        mask.params = formulas::inverted_dropout(p, seed);
    }
    return mask;
}

bool Network::Impl::penalized(const GraphLayer& layer) const {
    return layer.config.has_sparseness_penalty() && layer.reaches_output;
}

SparseNoise Network::Impl::input_noise(int l, bool training, uint64_t mask_seed) const {
    SparseNoise noise;
    if (!training) return noise;
    // DSSTNE's Denoising and the input layer's pDropout both drop stored inputs; combined, an
    // entry survives both.
    const double keep = (1.0 - graph.config.denoising_p) * (1.0 - graph.layers[l].config.p_dropout);
    noise.p = static_cast<float>(1.0 - keep);
    const auto index = static_cast<uint64_t>(l);
    noise.seed = formulas::derive_seed(mask_seed, index, kDenoiseStream);
    return noise;
}

void Network::Impl::forward(const engine::Bindings& data, const BatchRows& rows, bool training,
                            uint64_t mask_seed) {
    if (training) {
        catch_up_batch(data, rows);
    } else {
        catch_up_all();
    }
    std::vector<float*> act(graph.layers.size(), nullptr);
    std::vector<uint16_t*> act_bf16(graph.layers.size(), nullptr);
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        act[l] = buffers.layers[l].act.data();
        act_bf16[l] = act_copy(int(l));
    }
    // A training step's output activations are left to backward's output_epilogue (one pass per
    // row: activation, delta, loss) unless a split SoftMax needs its collectives or another
    // layer reads an output layer.
    bool defer = training && buffers.fuse_output_epilogue && !plan.split();
    for (const GraphEdge& e : graph.edges) defer = defer && !graph.layers[e.source].is_output();
    for (int s : graph.order)
        for (int k : graph.layers[s].skips) defer = defer && !graph.layers[k].is_output();
    buffers.output_activation_pending = defer;
    forward(*backend, act, data, rows, training, mask_seed, -1, defer, &act_bf16);
}

void Network::Impl::forward(Backend& be, const std::vector<float*>& act,
                            const engine::Bindings& data, const BatchRows& rows, bool training,
                            uint64_t mask_seed, int skip_layer, bool defer_output_activation,
                            const std::vector<uint16_t*>* act_bf16) const {
    const size_t batch = rows.batch;
    // act[l]'s padding holds zeros (the network's buffers and forward_into's callers'):
    // zero_padded, as layer_rows.
    auto view = [&](int l) {
        return MatrixView{act[l], batch, plan.layers[l].n_local, plan.layers[l].ld,
                          /*zero_padded=*/true};
    };
    // Layer l's BF16 copy of its activations (nullptr: none), and the view a GEMM reads them by.
    const auto copy_of = [&](int l) { return act_bf16 != nullptr ? (*act_bf16)[l] : nullptr; };
    const auto operand = [&](int l) {
        ConstMatrixView v = view(l);
        v.bf16 = copy_of(l);
        return v;
    };
    if (plan.split() && &be != backend.get()) {
        throw Error(ErrorCategory::kInternal, "a split network runs on its own backend only");
    }
    for (int l : graph.order) {
        const GraphLayer& layer = graph.layers[l];
        if (layer.is_input() || l == skip_layer) continue;
        const MatrixView z = view(l);
        bool first = true;  // the first product written overwrites z
        for (size_t k = 0; k < layer.in_weights.size(); ++k) {
            const GraphEdge& w = graph.edges[layer.in_weights[k]];
            // FixedWeights with InTraining false: an inference-only path (no split: refused).
            if (training && w.fixed && !w.fixed_in_training) continue;
            const GraphLayer& source = graph.layers[w.source];
            const float beta = first ? 0.0f : 1.0f;
            first = false;
            const ConstMatrixView wv = matrix_of(w);
            switch (plan.edges[w.owner].split) {
                case engine::Split::kNone:
                    if (source.is_input()) {  // never transposed (refused when built)
                        be.csr_matmul(data.layer_data[w.source]->view(rows),
                                      input_noise(w.source, training, mask_seed), wv, z, beta);
                    } else {
                        be.gemm(false, w.transposed, 1.0f, operand(w.source), wv, beta, z);
                    }
                    break;
                case engine::Split::kByInput: {
                    // This rank's rows of W give a partial z over every unit; the ranks' sum of
                    // the partials, band by band, is z.
                    const MatrixView part = whole_rows(plan.full_partial.data(), l, batch);
                    if (source.is_input()) {
                        be.csr_matmul(data.layer_data[w.source]->view(rows),
                                      input_noise(w.source, training, mask_seed), wv, part, 0.0f);
                    } else {
                        be.gemm(false, false, 1.0f, view(w.source), wv, 0.0f, part);
                    }
                    reduce_scatter_columns(l, part, beta, z);
                    break;
                }
                case engine::Split::kByOutput: {
                    // Every rank's band of the source activations, then this rank's columns.
                    const MatrixView all = gathered_source(layer.in_weights[k], batch);
                    gather_columns(w.source, view(w.source), all);
                    be.gemm(false, false, 1.0f, all, wv, beta, z);
                    break;
                }
            }
        }
        if (first) be.fill(z.data, batch * z.ld, 0.0f);  // every source left out
        // Skip: the skipped layers' stored activations join z before the activation (DSSTNE).
        for (int s : layer.skips) be.add_matrix(1.0f, view(s), 1.0f, z);
        // The op that writes the activations writes their BF16 copy too, where the layer keeps
        // one (never a split SoftMax or a deferred output layer: keeps_act_bf16).
        uint16_t* const z16 = copy_of(l);
        if (plan.split() && layer.activation.kind == Activation::kSoftMax) {
            split_softmax(l, z);
        } else if (defer_output_activation && layer.is_output()) {
            // z + bias and the activation: backward's output_epilogue.
        } else if (training && !layer.is_output() && layer.config.p_dropout > 0.0f) {
            be.bias_activation_dropout(layer.activation, params.layers[l].bias.data(),
                                       dropout_mask(l, rows, mask_seed), z, z16);
            continue;
        } else {
            be.bias_activation_forward(layer.activation, params.layers[l].bias.data(), z, z16);
            continue;  // (a training dropout here is bias_activation_dropout's, above)
        }
        if (z16 != nullptr) {
            throw Error(ErrorCategory::kInternal, "forward: layer " + layer.config.name +
                                                      " keeps a BF16 copy its producer cannot "
                                                      "write");
        }
        if (training && !layer.is_output() && layer.config.p_dropout > 0.0f) {
            be.dropout(dropout_mask(l, rows, mask_seed), z);
        }
    }
}

// ---- collectives over layer bands ----

void Network::Impl::gather_columns(int l, ConstMatrixView local, MatrixView full) const {
    const size_t batch = local.rows;
    const size_t block = batch * plan.layers[l].cap;
    const float* send = local.data;  // packed rows: the band's buffer has room for the block
    if (local.ld != local.cols) {    // padded rows: repacked first
        backend->add_matrix(1.0f, local, 0.0f,
                            MatrixView{plan.comm_local.data(), batch, local.cols, local.cols});
        send = plan.comm_local.data();
    }
    plan.comm->all_gather(send, plan.comm_blocks.data(), block, CommType::kFloat32);
    for (int r = 0; r < plan.ranks; ++r) {
        const engine::Band b = engine::band_of(graph.layers[l].n, plan.ranks, r);
        if (b.count == 0) continue;
        backend->add_matrix(
            1.0f, ConstMatrixView(plan.comm_blocks.data() + r * block, batch, b.count, b.count),
            0.0f, MatrixView{full.data + b.offset, batch, b.count, full.ld});
    }
}

void Network::Impl::reduce_scatter_columns(int l, ConstMatrixView full, float beta,
                                           MatrixView out) const {
    const size_t batch = full.rows;
    const size_t block = batch * plan.layers[l].cap;
    for (int r = 0; r < plan.ranks; ++r) {
        const engine::Band b = engine::band_of(graph.layers[l].n, plan.ranks, r);
        if (b.count == 0) continue;
        backend->add_matrix(
            1.0f, ConstMatrixView(full.data + b.offset, batch, b.count, full.ld), 0.0f,
            MatrixView{plan.comm_blocks.data() + r * block, batch, b.count, b.count});
    }
    // Packed rows (out's buffer holds cap columns per row, room for the received block) with
    // beta 0 receive in place; padded rows, or a sum, through comm_local.
    float* recv = beta == 0.0f && out.ld == out.cols ? out.data : plan.comm_local.data();
    plan.comm->reduce_scatter(plan.comm_blocks.data(), recv, block, CommType::kFloat32,
                              CommOp::kSum);
    if (recv != out.data) {
        backend->add_matrix(1.0f, ConstMatrixView(recv, batch, out.cols, out.cols), beta, out);
    }
}

void Network::Impl::all_reduce(float* data, size_t count, CommOp op) const {
    plan.comm->all_reduce(data, count, CommType::kFloat32, op);
}

void Network::Impl::split_softmax(int l, MatrixView z) const {
    const GraphLayer& layer = graph.layers[l];
    // SoftMax of rows split across ranks: z + bias, the row's global max, exp, global sum.
    formulas::ActivationParams linear = layer.activation;
    linear.kind = Activation::kLinear;
    backend->bias_activation_forward(linear, params.layers[l].bias.data(), z);
    float* row_max = plan.row_stat.data();
    float* row_sum = plan.row_stat.data() + buffers.batch_capacity;
    backend->row_max(z, row_max);
    all_reduce(row_max, z.rows, CommOp::kMax);
    backend->exp_rows(row_max, z, row_sum);
    all_reduce(row_sum, z.rows, CommOp::kSum);
    backend->divide_rows(row_sum, z);
}

void Network::Impl::clip_delta_rows(float max_norm, MatrixView d) const {
    if (!plan.split()) {
        backend->normalize_rows(max_norm, d);
        return;
    }
    // DeltaNorm of rows split across ranks: each row's whole norm.
    float* sq = plan.row_stat.data();
    backend->row_sum_squares(d, sq);
    all_reduce(sq, d.rows, CommOp::kSum);
    backend->clip_rows(max_norm, sq, d);
}

void Network::Impl::backward(const engine::Bindings& data, const BatchRows& rows, bool training,
                             uint64_t mask_seed, double* loss_sum) {
    const size_t batch = rows.batch;
    // Gradients of the mean loss over the batch (data parallelism: the whole batch, of which
    // these rows are this rank's share).
    const float scale =
        1.0f / static_cast<float>(buffers.loss_batch > 0 ? buffers.loss_batch : batch);
    std::vector<bool> has_delta(graph.layers.size(), false);
    for (engine::EdgeBuffers& e : buffers.edges) {
        e.grad_ready = false;
        e.deferred_rows = 0;
        e.sparse_deferred = false;
    }
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        if (!layer.is_output()) continue;
        engine::LayerBuffers& buf = buffers.layers[l];
        // The delta may be written over the activations (delta_over_activation): both ops read
        // an element's activation, and the row's statistics, before they write its delta.
        MatrixView delta = layer_delta(l, batch);
        // The guard's check of the activations comes with them (buf.act_norms).
        if (buffers.output_activation_pending) {
            backend->output_epilogue(loss_params(layer, *data.layer_data[l]), layer.activation,
                                     params.layers[l].bias.data(), layer_rows(buf.act, l, batch),
                                     data.layer_data[l]->view(rows), scale, delta, loss_sum,
                                     buf.act_norms.data(), delta_copy(int(l)));
        } else {
            backend->output_delta(loss_params(layer, *data.layer_data[l]), layer.activation,
                                  layer_rows(buf.act, l, batch), data.layer_data[l]->view(rows),
                                  scale, delta, loss_sum, buf.act_norms.data(), delta_copy(int(l)));
        }
        // (A layer with DeltaNorm keeps no BF16 copy of its delta: clip_rows changes it.)
        // DeltaNorm bounds each example's own delta; ours carry the 1/batch of the mean.
        if (layer.config.delta_norm > 0.0f) clip_delta_rows(layer.config.delta_norm * scale, delta);
        has_delta[l] = true;
    }
    buffers.output_activation_pending = false;
    for (auto it = graph.order.rbegin(); it != graph.order.rend(); ++it) {
        const int l = *it;
        const GraphLayer& layer = graph.layers[l];
        if (layer.is_input() || !layer.reaches_output || !has_delta[l]) continue;
        engine::LayerBuffers& buf = buffers.layers[l];
        MatrixView dz = layer_delta(l, batch);
        if (!layer.is_output()) {  // dL/dA -> dL/dZ
            const ConstMatrixView act = layer_rows(buf.act, l, batch);
            // The penalty is a function of the stored (post-dropout) activations, as in DSSTNE.
            if (penalized(layer)) {
                const SparsenessPenalty& sp = layer.config.sparseness_penalty;
                backend->sparseness_penalty(sp.p, sp.beta, act, scale, dz, loss_sum);
            }
            const bool masked = training && layer.config.p_dropout > 0.0f;
            const DropoutMask mask = masked ? dropout_mask(l, rows, mask_seed) : DropoutMask{};
            if (layer.config.delta_norm > 0.0f) {  // the rows' norms between the two ops
                // (no BF16 copy of this delta: clip_rows changes it after the producer)
                backend->activation_backward(layer.activation, act, masked ? &mask : nullptr, dz);
                clip_delta_rows(layer.config.delta_norm * scale, dz);
                backend->column_sum(dz, 1.0f, 0.0f, buf.bias_grad.data());
            } else {  // the bias gradient summed as the deltas are written
                backend->activation_backward_column_sum(layer.activation, act,
                                                        masked ? &mask : nullptr, dz,
                                                        buf.bias_grad.data(), delta_copy(l));
            }
        } else {
            backend->column_sum(dz, 1.0f, 0.0f, buf.bias_grad.data());
        }
        // Matrices split by input rows need the whole dz: gathered once for all of them, into
        // the layer's own buffer (their gradients deferred to update() read it there).
        bool gathered_dz = false;
        for (int wi : layer.in_weights) {
            const GraphEdge& w = graph.edges[wi];
            // A fixed matrix is never trained, and its source, an Input layer, has no delta.
            if (graph.edges[w.owner].fixed) continue;
            engine::EdgeBuffers& m = buffers.edges[w.owner];  // the matrix's gradient
            const engine::EdgeSplit& m_block = plan.edges[w.owner];
            const GraphLayer& source = graph.layers[w.source];
            engine::LayerBuffers& source_buf = buffers.layers[w.source];
            const SparseRowGrad sparse_grad =
                buffers.edges[wi].sparse_grad(plan.edges[wi].local_cols);
            // A shared matrix sums the gradient of every use: the first use of the batch
            // overwrites, the others add.
            const float grad_beta = m.grad_ready ? 1.0f : 0.0f;
            // Allocated by its first write (a fused update never writes it).
            const auto grad = [&] { return dense_gradient(w.owner); };
            if (m_block.split == engine::Split::kByInput && !gathered_dz) {
                gather_columns(l, dz, gathered_delta(l, batch));
                gathered_dz = true;
            }
            // A sparse input's row-sparse gradient with one use (split by input rows or not):
            // update() runs csr_weight_grad with the step (sparse_step), so the compact gradient
            // is not written and read back. Its operands: the batch's input view and noise
            // (kept here), the delta (deferred_delta: the layer's, or its gathered whole).
            const bool defer_sparse =
                source.is_input() && buffers.defer_sparse_grads && sparse_gradient_deferrable(wi);
            if (defer_sparse) {
                m.sparse_deferred = true;
                m.deferred_x = data.layer_data[w.source]->view(rows);
                m.deferred_noise = input_noise(w.source, training, mask_seed);
                m.deferred_rows = batch;
                m.grad_ready = true;
                continue;
            }
            // A dense gradient with one use: update() runs its GEMM with the step inside where
            // the optimizer allows (fused_update: no gradient written and re-read, and none
            // allocated), else writes it first (materialize_gradient). The GEMMs below that
            // form the source's delta still read the weights of before the step.
            const bool defer_dense =
                !source.is_input() && buffers.defer_dense_grads && gradient_deferrable(wi);
            if (m_block.split == engine::Split::kByInput) {
                // dW (this rank's rows) = a_band^T . dz_all; the source band's delta is local.
                const MatrixView dz_all = gathered_delta(l, batch);
                if (source.is_input()) {
                    backend->csr_weight_grad(data.layer_data[w.source]->view(rows),
                                             input_noise(w.source, training, mask_seed), dz_all,
                                             1.0f, sparse_grad);
                } else {
                    if (defer_dense) {
                        m.deferred_rows = batch;
                    } else {
                        backend->gemm(true, false, 1.0f,
                                      layer_rows(source_buf.act, w.source, batch), dz_all,
                                      grad_beta, grad());
                    }
                    if (source.reaches_output) {
                        backend->gemm(false, true, 1.0f, dz_all, matrix_of(w),
                                      has_delta[w.source] ? 1.0f : 0.0f,
                                      layer_delta(w.source, batch));
                        has_delta[w.source] = true;
                    }
                }
                m.grad_ready = true;
                continue;
            }
            if (m_block.split == engine::Split::kByOutput) {
                // dW (this rank's columns) = a_all^T . dz (a_all: forward's gather, kept in
                // m.gathered until the next forward); the source delta is the ranks' sum of the
                // partials dz . W_band^T, band by band.
                if (defer_dense) {
                    m.deferred_rows = batch;
                } else {
                    backend->gemm(true, false, 1.0f, gathered_source(w.owner, batch), dz, grad_beta,
                                  grad());
                }
                m.grad_ready = true;
                if (source.reaches_output) {
                    const MatrixView part = whole_rows(plan.full_partial.data(), w.source, batch);
                    backend->gemm(false, true, 1.0f, dz, matrix_of(w), 0.0f, part);
                    reduce_scatter_columns(w.source, part, has_delta[w.source] ? 1.0f : 0.0f,
                                           layer_delta(w.source, batch));
                    has_delta[w.source] = true;
                }
                continue;
            }
            if (source.is_input()) {
                backend->csr_weight_grad(data.layer_data[w.source]->view(rows),
                                         input_noise(w.source, training, mask_seed), dz, 1.0f,
                                         sparse_grad);
                if (m_block.dense_grad) backend->scatter_rows(sparse_grad, grad_beta, grad());
                m.grad_ready = true;
                continue;
            }
            // z = a . M: dM = a^T . dz; transposed, z = a . M^T: dM = dz^T . a.
            if (defer_dense) {
                // update() runs this GEMM with the step inside (no gradient written and re-read:
                // 2 x 4 bytes per weight less each step).
                m.deferred_rows = batch;
            } else if (w.transposed) {
                backend->gemm(true, false, 1.0f, delta_operand(l, batch),
                              act_operand(w.source, batch), grad_beta, grad());
            } else {
                backend->gemm(true, false, 1.0f, act_operand(w.source, batch),
                              delta_operand(l, batch), grad_beta, grad());
            }
            m.grad_ready = true;
            if (source.reaches_output) {
                backend->gemm(false, !w.transposed, 1.0f, delta_operand(l, batch), matrix_of(w),
                              has_delta[w.source] ? 1.0f : 0.0f, layer_delta(w.source, batch));
                has_delta[w.source] = true;
            }
        }
        // Skip: z gained the skipped layer's activations, so their gradient gains dz (the same
        // bands: a skipped layer is as wide as this one).
        for (int s : layer.skips) {
            backend->add_matrix(1.0f, dz, has_delta[s] ? 1.0f : 0.0f, layer_delta(s, batch));
            has_delta[s] = true;
        }
    }
}

void Network::Impl::add_losses(const engine::Bindings& data, const BatchRows& rows,
                               double* loss_sum) {
    const size_t batch = rows.batch;
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        engine::LayerBuffers& buf = buffers.layers[l];
        if (layer.is_output()) {
            // (Over the activations where the delta is: nothing reads them afterwards.)
            // (The delta's BF16 copy with it, so that a copy never lags its FP32 values.)
            backend->output_delta(loss_params(layer, *data.layer_data[l]), layer.activation,
                                  layer_rows(buf.act, l, batch), data.layer_data[l]->view(rows),
                                  1.0f, layer_delta(int(l), batch), loss_sum, nullptr,
                                  delta_copy(int(l)));
        } else if (penalized(layer)) {
            const SparsenessPenalty& sp = layer.config.sparseness_penalty;
            backend->sparseness_penalty(sp.p, sp.beta, layer_rows(buf.act, l, batch), 0.0f,
                                        MatrixView{}, loss_sum);
        }
    }
}

void Network::Impl::update(const OptimizerOptions& optimizer, float decay) {
    ++params.optimizer_steps;
    const double t = static_cast<double>(params.optimizer_steps);
    formulas::OptimizerStep step;
    step.kind = optimizer.kind;
    // DSSTNE's Decay: alpha / (1 + decay * batches before this one).
    step.learning_rate =
        static_cast<float>(double(optimizer.learning_rate) / (1.0 + double(decay) * (t - 1.0)));
    step.mu = optimizer.mu;
    step.mu1 = optimizer.mu1;
    step.epsilon = optimizer.resolved_epsilon();
    step.l2 = optimizer.l2;
    step.l1 = optimizer.l1;
    step.bias_correction1 = static_cast<float>(1.0 / (1.0 - std::pow(double(optimizer.mu), t)));
    step.bias_correction2 = static_cast<float>(1.0 / (1.0 - std::pow(double(optimizer.mu1), t)));
    const bool rows_current = !catch_up.pending;  // every row is at step t - 1
    if (rows_current) catch_up.clocked.assign(graph.edges.size(), false);
    for (size_t wi = 0; wi < graph.edges.size(); ++wi) {
        const GraphEdge& w = graph.edges[wi];
        engine::EdgeBuffers& g = buffers.edges[wi];
        // One step per matrix, by its owner, once backward wrote its gradient (no use of it
        // reaches an output otherwise).
        if (w.owner != static_cast<int>(wi) || !g.grad_ready) continue;
        const engine::EdgeSplit& block = plan.edges[wi];
        engine::EdgeParams& matrix = params.edges[wi];
        MatrixView wv = matrix_rows(matrix.w, int(wi));
        if (g.deferred_rows > 0 && !g.sparse_deferred) {
            if (fused_update(static_cast<int>(wi), step)) continue;  // the copy written too
            materialize_gradient(static_cast<int>(wi));
        }
        // Whether the step's own pass writes the BF16 copy (a dense step whose weights nothing
        // changes afterwards); else one round_bf16 pass after the step.
        bool copy_written = false;
        if (!block.dense_grad) {
            RowClock clock;
            if (uses_row_clock(static_cast<int>(wi), optimizer, step, decay == 0.0f)) {
                if (rows_current) {  // (re)start the clock at step t - 1
                    const std::vector<uint32_t> now(block.local_rows, uint32_t(t - 1));
                    if (matrix.row_clock.size() != now.size()) {
                        matrix.row_clock = DeviceArray<uint32_t>(*backend, now.size(), "row clock");
                    }
                    matrix.row_clock.upload(now.data(), now.size());
                }
                catch_up.clocked[wi] = true;
                catch_up.pending = true;
                catch_up.step = step;
                clock = {matrix.row_clock.data(), uint32_t(t)};
            }
            const bool touched_only = clock.last != nullptr ||
                                      optimizer.sparse_update == SparseUpdate::kLazy ||
                                      formulas::zero_gradient_is_noop(step);
            if (g.sparse_deferred && touched_only) {
                backend->sparse_step(g.deferred_x, g.deferred_noise,
                                     deferred_delta(int(wi), g.deferred_rows), 1.0f, step, wv,
                                     g.sparse_grad(block.local_cols), matrix.state1.data(),
                                     matrix.state2.data(), optimizer.sparse_update, clock);
                g.sparse_deferred = false;
                g.deferred_rows = 0;
            } else {
                materialize_gradient(static_cast<int>(wi));
                backend->optimizer_step_rows(step, wv, g.sparse_grad(block.local_cols),
                                             matrix.state1.data(), matrix.state2.data(),
                                             optimizer.sparse_update, clock);
            }
        } else {
            copy_written = !has_weight_norm(static_cast<int>(wi));
            backend->optimizer_step(step, wv, dense_gradient(static_cast<int>(wi)),
                                    matrix.state1.data(), matrix.state2.data(),
                                    copy_written ? matrix.w_bf16.data() : nullptr);
        }
        apply_weight_norms(static_cast<int>(wi));
        if (!copy_written) refresh_bf16_copy(static_cast<int>(wi));
    }
    formulas::OptimizerStep bias_step = step;
    bias_step.l2 = 0.0f;  // no regularisation of biases (as DSSTNE)
    bias_step.l1 = 0.0f;
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        const GraphLayer& layer = graph.layers[l];
        if (layer.is_input() || !layer.reaches_output) continue;
        const uint32_t n_local = plan.layers[l].n_local;
        engine::LayerParams& bias = params.layers[l];
        backend->optimizer_step(bias_step, MatrixView{bias.bias.data(), 1, n_local, n_local},
                                MatrixView{buffers.layers[l].bias_grad.data(), 1, n_local, n_local},
                                bias.bias_state1.data(), bias.bias_state2.data());
    }
}

bool Network::Impl::gradient_deferrable(int wi) const {
    const GraphEdge& w = graph.edges[wi];
    if (w.owner != wi || w.fixed || plan.data_parallel || graph.layers[w.source].is_input())
        return false;
    // Split matrices too: their operands stay until update() (EdgeBuffers::gathered,
    // LayerBuffers::delta_all), so no dense gradient is written there either.
    if (!plan.edges[wi].dense_grad) return false;
    for (size_t e = 0; e < graph.edges.size(); ++e) {  // a shared matrix sums several uses
        if (graph.edges[e].owner == wi && e != size_t(wi)) return false;
    }
    return true;
}

bool Network::Impl::sparse_gradient_deferrable(int wi) const {
    const GraphEdge& w = graph.edges[wi];
    if (w.owner != wi || w.fixed || plan.data_parallel || !w.sparse_source) return false;
    // Split by input rows too: the delta it reads is the layer's gathered whole (delta_all).
    if (plan.edges[wi].dense_grad) return false;
    for (size_t e = 0; e < graph.edges.size(); ++e) {  // a shared matrix sums several uses
        if (graph.edges[e].owner == wi && e != size_t(wi)) return false;
    }
    return true;
}

bool Network::Impl::uses_row_clock(int wi, const OptimizerOptions& optimizer,
                                   const formulas::OptimizerStep& step, bool constant_rate) const {
    // StepSwitches::row_catch_up off: the every-row exact path (to compare the two;
    // docs/config-reference.md).
    if (!options.switches.row_catch_up || optimizer.sparse_update != SparseUpdate::kExact)
        return false;
    if (!formulas::catch_up_exact(step, constant_rate)) return false;
    if (params.optimizer_steps >= UINT32_MAX) return false;  // the clock is 32-bit
    // WeightNorm clips whole columns after every step: every row takes part.
    for (const GraphEdge& w : graph.edges) {
        if (w.owner == wi && graph.layers[w.destination].config.weight_norm > 0.0f) return false;
    }
    return true;
}

bool Network::Impl::delta_over_activation(int l) const {
    if (!options.switches.delta_over_activation) return false;
    const GraphLayer& layer = graph.layers[l];
    return layer.is_output() && layer.out_weights.empty() && layer.out_skips.empty();
}

bool Network::Impl::gathers_delta(int l) const {
    if (!plan.split()) return false;
    for (int wi : graph.layers[l].in_weights) {
        if (plan.edges[graph.edges[wi].owner].split == engine::Split::kByInput) return true;
    }
    return false;
}

MatrixView Network::Impl::deferred_delta(int wi, size_t batch) {
    const int d = graph.edges[wi].destination;
    return plan.edges[wi].split == engine::Split::kByInput ? gathered_delta(d, batch)
                                                           : layer_delta(d, batch);
}

void Network::Impl::deferred_gradient_gemm(int wi, float alpha, float beta, MatrixView c,
                                           uint16_t* c_bf16) {
    const GraphEdge& w = graph.edges[wi];
    const size_t batch = buffers.edges[wi].deferred_rows;
    // Split by output columns: every rank's source activations, gathered by forward.
    // (Unsplit: the layers' buffers, with their BF16 copies where they keep them.)
    const ConstMatrixView a = plan.edges[wi].split == engine::Split::kByOutput
                                  ? ConstMatrixView(gathered_source(wi, batch))
                                  : act_operand(w.source, batch);
    const ConstMatrixView dz = plan.edges[wi].split == engine::Split::kByInput
                                   ? ConstMatrixView(gathered_delta(w.destination, batch))
                                   : delta_operand(w.destination, batch);
    // The same operands and order as backward's GEMM: z = a . M: dM = a^T . dz; transposed,
    // z = a . M^T: dM = dz^T . a.
    if (w.transposed) {
        backend->gemm(true, false, alpha, dz, a, beta, c, c_bf16);
    } else {
        backend->gemm(true, false, alpha, a, dz, beta, c, c_bf16);
    }
}

void Network::Impl::materialize_gradient(int wi) {
    engine::EdgeBuffers& g = buffers.edges[wi];
    if (g.deferred_rows == 0) return;
    if (g.sparse_deferred) {
        backend->csr_weight_grad(g.deferred_x, g.deferred_noise,
                                 deferred_delta(wi, g.deferred_rows), 1.0f,
                                 buffers.edges[wi].sparse_grad(plan.edges[wi].local_cols));
        g.sparse_deferred = false;
        g.deferred_rows = 0;
        return;
    }
    deferred_gradient_gemm(wi, 1.0f, 0.0f, dense_gradient(wi));
    g.deferred_rows = 0;
}

void Network::Impl::materialize_gradients() {
    for (size_t wi = 0; wi < graph.edges.size(); ++wi) materialize_gradient(int(wi));
}

bool Network::Impl::update_fusable(int wi, const formulas::OptimizerStep& step) const {
    const GraphEdge& w = graph.edges[wi];
    // L1 (sign(w)) and WeightNorm need the materialised gradient; so do the other optimizers
    // (their rules are not linear in g).
    if (step.l1 != 0.0f || graph.layers[w.destination].config.weight_norm > 0.0f) return false;
    if (step.kind != OptimizerKind::kSgd && step.kind != OptimizerKind::kMomentum) return false;
    return gradient_deferrable(wi);
}

MatrixView Network::Impl::dense_gradient(int wi) {
    engine::EdgeBuffers& g = buffers.edges[wi];
    const engine::EdgeSplit& block = plan.edges[wi];
    const size_t n = block.elements();
    if (g.grad.size() != n) {
        g.grad = DeviceArray<float>(*backend, n, "weight gradients");
        // Zeros in the padding, which no write reaches (the guard's search reads every value).
        if (block.ld != block.local_cols) backend->fill(g.grad.data(), n, 0.0f);
    }
    return matrix_rows(g.grad, wi);
}

bool Network::Impl::fused_update(int wi, const formulas::OptimizerStep& step) {
    if (!update_fusable(wi, step)) return false;
    engine::EdgeParams& matrix = params.edges[wi];
    const MatrixView wv = matrix_rows(matrix.w, wi);
    const float lr = step.learning_rate;
    if (step.kind == OptimizerKind::kSgd) {
        // w -= lr (g + l2 w)  as  w := (1 - lr l2) w - lr g: C = W in the GEMM, which writes the
        // BF16 copy of the new weights too (on AMX, a wide layer's in the same pass, amx_gemm.h;
        // the emulation block by block; oneDNN's matmul one round_bf16 pass after it).
        deferred_gradient_gemm(wi, -lr, 1.0f - lr * step.l2, wv, matrix.w_bf16.data());
    } else {
        // v := mu v - lr (g + l2 w); w += v: the l2 term first (one pass, only with L2), then
        // C = v in the GEMM, then one add.
        const MatrixView v = matrix_rows(matrix.state1, wi);
        float beta = step.mu;
        if (step.l2 != 0.0f) {
            backend->add_matrix(-lr * step.l2, wv, step.mu, v);
            beta = 1.0f;
        }
        deferred_gradient_gemm(wi, -lr, beta, v);
        backend->add_matrix(1.0f, v, 1.0f, wv);
        refresh_bf16_copy(wi);  // add_matrix writes FP32 only: one pass of its own
    }
    buffers.edges[wi].deferred_rows = 0;
    return true;
}

void Network::Impl::catch_up_batch(const engine::Bindings& data, const BatchRows& rows) {
    if (!catch_up.pending) return;
    const RowClock now{nullptr, uint32_t(params.optimizer_steps)};
    for (size_t wi = 0; wi < graph.edges.size(); ++wi) {
        if (!catch_up.clocked[wi]) continue;
        const GraphEdge& w = graph.edges[wi];
        engine::EdgeParams& matrix = params.edges[wi];
        const CsrBatchView x = data.layer_data[w.source]->view(rows);
        backend->catch_up_rows(catch_up.step, matrix_rows(matrix.w, int(wi)), &x,
                               matrix.state1.data(), {matrix.row_clock.data(), now.now});
        refresh_bf16_copy(int(wi));  // a clocked matrix a gemm also reads (tied): rare
    }
}

void Network::Impl::catch_up_all() {
    if (!catch_up.pending) return;
    for (size_t wi = 0; wi < graph.edges.size(); ++wi) {
        if (!catch_up.clocked[wi]) continue;
        engine::EdgeParams& matrix = params.edges[wi];
        backend->catch_up_rows(catch_up.step, matrix_rows(matrix.w, int(wi)), nullptr,
                               matrix.state1.data(),
                               {matrix.row_clock.data(), uint32_t(params.optimizer_steps)});
        refresh_bf16_copy(int(wi));
    }
    catch_up.pending = false;
}

bool Network::Impl::has_weight_norm(int wi) const {
    for (const GraphEdge& w : graph.edges) {
        if (w.owner == wi && graph.layers[w.destination].config.weight_norm > 0.0f) return true;
    }
    return false;
}

bool Network::Impl::gemm_reads_matrix(int wi) const {
    for (const GraphEdge& w : graph.edges) {
        if (w.owner == wi && !graph.layers[w.source].is_input()) return true;
    }
    return false;
}

bool Network::Impl::keeps_act_bf16(int l, Precision p) const {
    const GraphLayer& layer = graph.layers[l];
    // Forward writes a layer's activations with one op (bias_activation_forward or
    // bias_activation_dropout) except a split SoftMax and a deferred output layer (an output
    // layer with an edge out of it is never deferred).
    return p == Precision::kBf16 && options.switches.bf16_activation_copies && !plan.split() &&
           !layer.is_input() && !layer.out_weights.empty();
}

bool Network::Impl::keeps_delta_bf16(int l, Precision p) const {
    const GraphLayer& layer = graph.layers[l];
    if (p != Precision::kBf16 || !options.switches.bf16_activation_copies || plan.split() ||
        layer.is_input() || !layer.reaches_output || layer.config.delta_norm > 0.0f)
        return false;
    // An output layer's delta gains later layers' input deltas and Skip gradients after
    // output_delta wrote it (a hidden layer's are all in before activation_backward runs).
    if (layer.is_output() && (!layer.out_weights.empty() || !layer.out_skips.empty())) return false;
    for (int wi : layer.in_weights) {  // a GEMM reads the delta: a trained edge from a dense layer
        const GraphEdge& w = graph.edges[wi];
        if (!graph.layers[w.source].is_input() && !graph.edges[w.owner].fixed) return true;
    }
    return false;
}

void Network::Impl::sync_activation_copies() {
    const Precision p = backend->precision();
    for (size_t l = 0; l < graph.layers.size(); ++l) {
        engine::LayerBuffers& buf = buffers.layers[l];
        // batch x ld values, rounded up to an even count so that fill() zeroes whole floats.
        const size_t n = (buffers.batch_capacity * plan.layers[l].ld + 1) / 2 * 2;
        const auto sync = [&](bool keep, DeviceArray<uint16_t>& copy, const char* what) {
            if (!keep || n == 0) {
                copy = DeviceArray<uint16_t>();
                return;
            }
            if (copy.size() == n) return;
            copy = DeviceArray<uint16_t>(*backend, n, what);
            // Zeros in the padding, which no producer writes (a GEMM's extents may run over it).
            backend->fill(reinterpret_cast<float*>(copy.data()), n / 2, 0.0f);
        };
        sync(keeps_act_bf16(int(l), p), buf.act_bf16, "BF16 activations");
        sync(keeps_delta_bf16(int(l), p), buf.delta_bf16, "BF16 deltas");
    }
}

bool Network::Impl::keeps_bf16_copy(int wi) const {
    return backend->precision() == Precision::kBf16 && graph.edges[wi].owner == wi &&
           options.switches.bf16_weight_copies && gemm_reads_matrix(wi);
}

void Network::Impl::sync_bf16_copies() {
    for (size_t wi = 0; wi < params.edges.size(); ++wi) {
        engine::EdgeParams& matrix = params.edges[wi];
        if (matrix.kept != engine::Kept::kFp32) continue;  // a streamed load's: as it was read
        if (!keeps_bf16_copy(int(wi))) {
            matrix.w_bf16 = DeviceArray<uint16_t>();
            continue;
        }
        const size_t n = plan.edges[wi].elements();
        if (matrix.w_bf16.size() != n)
            matrix.w_bf16 = DeviceArray<uint16_t>(*backend, n, "BF16 weights");
        refresh_bf16_copy(int(wi));
    }
    sync_activation_copies();  // the activations' and deltas' copies follow the precision too
}

void Network::Impl::refresh_bf16_copy(int wi) {
    engine::EdgeParams& matrix = params.edges[wi];
    if (matrix.w_bf16.size() == 0) return;
    backend->round_bf16(matrix_rows(matrix.w, wi), matrix.w_bf16.data());
}

void Network::Impl::require_fp32_weights(const std::string& what, int wi) const {
    if (!params.bf16_only) return;
    if (wi >= 0 && params.edges[wi].w.size() > 0) return;
    throw Error(ErrorCategory::kUsage,
                what +
                    ": the network keeps only the BF16 copies of its weights "
                    "(keep_only_bf16_weights: an inference network); load the model again");
}

void Network::Impl::apply_weight_norms(int wi) {
    // A split matrix is split by output columns here (plan_split refuses WeightNorm on the other
    // split), so its columns are whole.
    MatrixView wv = matrix_rows(params.edges[wi].w, wi);
    // Each use clips its destination units' incoming vectors: columns of M, or rows when it
    // uses M transposed. Clipping only shrinks, so every use's bound holds afterwards.
    for (const GraphEdge& w : graph.edges) {
        const float norm = graph.layers[w.destination].config.weight_norm;
        if (w.owner != wi || norm <= 0.0f) continue;
        if (w.transposed) {
            backend->normalize_rows(norm, wv);
        } else {
            backend->normalize_columns(norm, wv);
        }
    }
}

}  // namespace sparsenet
