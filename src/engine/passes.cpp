// Forward, backward and update passes: the engine's use of the backend op table.
#include <cmath>

#include "engine/network_impl.h"
#include "formulas/rng.h"
#include "sparsenet/error.h"

namespace sparsenet {

using engine::Layer;
using engine::Weight;

namespace {

// Purposes mixed into mask seeds so that streams never collide.
constexpr uint64_t kDropoutStream = 1;
constexpr uint64_t kDenoiseStream = 2;

MatrixView rows_of(DeviceArray<float>& buffer, size_t batch, size_t n) {
    return {buffer.data(), batch, n, n};
}

}  // namespace

formulas::LossParams Network::Impl::loss_params(const Layer& output,
                                                const engine::DeviceDataset& targets) const {
    formulas::LossParams p;
    p.kind = config.error_function;
    p.multinomial = config.error_function == ErrorFunction::kCrossEntropy &&
                    output.config.activation == Activation::kSoftMax;
    p.one_target = config.smce.one_target;
    p.zero_target = config.smce.zero_target;
    p.one_scale = config.smce.one_scale;
    p.zero_scale = config.smce.zero_scale;
    p.boost_one = config.delta_boost_one;
    p.boost_zero = config.delta_boost_zero;
    // SparseIgnoreZero is an attribute of the target dataset in DSSTNE.
    p.ignore_zero = targets.ignore_zero();
    return p;
}

DropoutMask Network::Impl::dropout_mask(int l, const BatchRows& rows, uint64_t mask_seed) const {
    const Layer& layer = layers[l];
    const float p = layer.config.p_dropout;
    const uint64_t seed = formulas::derive_seed(mask_seed, uint64_t(l), kDropoutStream);
    DropoutMask mask;
    mask.rows = rows;
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

bool Network::Impl::penalized(const Layer& layer) const {
    return layer.config.has_sparseness_penalty() && layer.reaches_output;
}

SparseNoise Network::Impl::input_noise(const Layer& input, bool training,
                                       uint64_t mask_seed) const {
    SparseNoise noise;
    if (!training) return noise;
    // DSSTNE's Denoising and the input layer's pDropout both drop stored inputs; combined, an
    // entry survives both.
    const double keep = (1.0 - config.denoising_p) * (1.0 - input.config.p_dropout);
    noise.p = static_cast<float>(1.0 - keep);
    const auto index = static_cast<uint64_t>(&input - layers.data());
    noise.seed = formulas::derive_seed(mask_seed, index, kDenoiseStream);
    return noise;
}

void Network::Impl::forward(const engine::Bindings& data, const BatchRows& rows, bool training,
                            uint64_t mask_seed) {
    std::vector<float*> act(layers.size(), nullptr);
    for (size_t l = 0; l < layers.size(); ++l) act[l] = layers[l].act.data();
    forward(*backend, act, data, rows, training, mask_seed);
}

void Network::Impl::forward(Backend& be, const std::vector<float*>& act,
                            const engine::Bindings& data, const BatchRows& rows, bool training,
                            uint64_t mask_seed) const {
    const size_t batch = rows.batch;
    auto view = [&](int l) { return MatrixView{act[l], batch, layers[l].n, layers[l].n}; };
    for (int l : order) {
        const Layer& layer = layers[l];
        if (layer.is_input()) continue;
        const MatrixView z = view(l);
        for (size_t k = 0; k < layer.in_weights.size(); ++k) {
            const Weight& w = weights[layer.in_weights[k]];
            const Layer& source = layers[w.source];
            const float beta = k == 0 ? 0.0f : 1.0f;
            const ConstMatrixView wv = matrix_of(w);
            if (source.is_input()) {  // never transposed (refused when the network is built)
                be.csr_matmul(data.layer_data[w.source]->view(rows),
                              input_noise(source, training, mask_seed), wv, z, beta);
            } else {
                be.gemm(false, w.transposed, 1.0f, view(w.source), wv, beta, z);
            }
        }
        // Skip: the skipped layers' stored activations join z before the activation (DSSTNE).
        for (int s : layer.skips) be.add_matrix(1.0f, view(s), 1.0f, z);
        be.bias_activation_forward(layer.activation, layer.bias.data(), z);
        if (training && !layer.is_output() && layer.config.p_dropout > 0.0f) {
            be.dropout(dropout_mask(l, rows, mask_seed), z);
        }
    }
}

void Network::Impl::backward(const engine::Bindings& data, const BatchRows& rows, bool training,
                             uint64_t mask_seed, double* loss_sum) {
    const size_t batch = rows.batch;
    const float scale = 1.0f / static_cast<float>(batch);  // gradients of the mean loss
    std::vector<bool> has_delta(layers.size(), false);
    for (Weight& w : weights) w.grad_ready = false;
    for (size_t l = 0; l < layers.size(); ++l) {
        Layer& layer = layers[l];
        if (!layer.is_output()) continue;
        MatrixView delta = rows_of(layer.delta, batch, layer.n);
        backend->output_delta(loss_params(layer, *data.layer_data[l]), layer.activation,
                              rows_of(layer.act, batch, layer.n), data.layer_data[l]->view(rows),
                              scale, delta, loss_sum);
        // DeltaNorm bounds each example's own delta; ours carry the 1/batch of the mean.
        if (layer.config.delta_norm > 0.0f) {
            backend->normalize_rows(layer.config.delta_norm * scale, delta);
        }
        has_delta[l] = true;
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const int l = *it;
        Layer& layer = layers[l];
        if (layer.is_input() || !layer.reaches_output || !has_delta[l]) continue;
        MatrixView dz = rows_of(layer.delta, batch, layer.n);
        if (!layer.is_output()) {  // dL/dA -> dL/dZ
            const ConstMatrixView act = rows_of(layer.act, batch, layer.n);
            // The penalty is a function of the stored (post-dropout) activations, as in DSSTNE.
            if (penalized(layer)) {
                const SparsenessPenalty& sp = layer.config.sparseness_penalty;
                backend->sparseness_penalty(sp.p, sp.beta, act, scale, dz, loss_sum);
            }
            if (training && layer.config.p_dropout > 0.0f) {
                const DropoutMask mask = dropout_mask(l, rows, mask_seed);
                backend->activation_backward(layer.activation, act, &mask, dz);
            } else {
                backend->activation_backward(layer.activation, act, nullptr, dz);
            }
            if (layer.config.delta_norm > 0.0f) {
                backend->normalize_rows(layer.config.delta_norm * scale, dz);
            }
        }
        backend->column_sum(dz, 1.0f, 0.0f, layer.bias_grad.data());
        for (int wi : layer.in_weights) {
            Weight& w = weights[wi];
            Weight& m = weights[w.owner];  // holds the matrix and its gradient
            Layer& source = layers[w.source];
            // A shared matrix sums the gradient of every use: the first use of the batch
            // overwrites, the others add.
            const float grad_beta = m.grad_ready ? 1.0f : 0.0f;
            MatrixView grad = rows_of(m.grad, m.rows, m.cols);
            if (source.is_input()) {
                backend->csr_weight_grad(data.layer_data[w.source]->view(rows),
                                         input_noise(source, training, mask_seed), dz, 1.0f,
                                         w.sparse_grad());
                if (m.dense_grad) backend->scatter_rows(w.sparse_grad(), grad_beta, grad);
                m.grad_ready = true;
                continue;
            }
            // z = a . M: dM = a^T . dz; transposed, z = a . M^T: dM = dz^T . a.
            if (w.transposed) {
                backend->gemm(true, false, 1.0f, dz, rows_of(source.act, batch, source.n),
                              grad_beta, grad);
            } else {
                backend->gemm(true, false, 1.0f, rows_of(source.act, batch, source.n), dz,
                              grad_beta, grad);
            }
            m.grad_ready = true;
            if (source.reaches_output) {
                backend->gemm(false, !w.transposed, 1.0f, dz, matrix_of(w),
                              has_delta[w.source] ? 1.0f : 0.0f,
                              rows_of(source.delta, batch, source.n));
                has_delta[w.source] = true;
            }
        }
        // Skip: z gained the skipped layer's activations, so their gradient gains dz.
        for (int s : layer.skips) {
            backend->add_matrix(1.0f, dz, has_delta[s] ? 1.0f : 0.0f,
                                rows_of(layers[s].delta, batch, layers[s].n));
            has_delta[s] = true;
        }
    }
}

void Network::Impl::add_losses(const engine::Bindings& data, const BatchRows& rows,
                               double* loss_sum) {
    const size_t batch = rows.batch;
    for (size_t l = 0; l < layers.size(); ++l) {
        Layer& layer = layers[l];
        if (layer.is_output()) {
            backend->output_delta(loss_params(layer, *data.layer_data[l]), layer.activation,
                                  rows_of(layer.act, batch, layer.n),
                                  data.layer_data[l]->view(rows), 1.0f,
                                  rows_of(layer.delta, batch, layer.n), loss_sum);
        } else if (penalized(layer)) {
            const SparsenessPenalty& sp = layer.config.sparseness_penalty;
            backend->sparseness_penalty(sp.p, sp.beta, rows_of(layer.act, batch, layer.n), 0.0f,
                                        MatrixView{}, loss_sum);
        }
    }
}

void Network::Impl::update(const OptimizerOptions& optimizer, float decay) {
    ++optimizer_steps;
    const double t = static_cast<double>(optimizer_steps);
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
    for (size_t wi = 0; wi < weights.size(); ++wi) {
        Weight& w = weights[wi];
        // One step per matrix, by its owner, once backward wrote its gradient (no use of it
        // reaches an output otherwise).
        if (w.owner != static_cast<int>(wi) || !w.grad_ready) continue;
        MatrixView wv = rows_of(w.w, w.rows, w.cols);
        if (!w.dense_grad) {
            backend->optimizer_step_rows(step, wv, w.sparse_grad(), w.state1.data(),
                                         w.state2.data(), optimizer.sparse_update);
        } else {
            backend->optimizer_step(step, wv, rows_of(w.grad, w.rows, w.cols), w.state1.data(),
                                    w.state2.data());
        }
        apply_weight_norms(static_cast<int>(wi));
    }
    formulas::OptimizerStep bias_step = step;
    bias_step.l2 = 0.0f;  // no regularisation of biases (as DSSTNE)
    bias_step.l1 = 0.0f;
    for (Layer& layer : layers) {
        if (layer.is_input() || !layer.reaches_output) continue;
        backend->optimizer_step(bias_step, rows_of(layer.bias, 1, layer.n),
                                rows_of(layer.bias_grad, 1, layer.n), layer.bias_state1.data(),
                                layer.bias_state2.data());
    }
}

void Network::Impl::apply_weight_norms(int wi) {
    Weight& m = weights[wi];
    MatrixView wv = rows_of(m.w, m.rows, m.cols);
    // Each use clips its destination units' incoming vectors: columns of M, or rows when it
    // uses M transposed. Clipping only shrinks, so every use's bound holds afterwards.
    for (const Weight& w : weights) {
        const float norm = layers[w.destination].config.weight_norm;
        if (w.owner != wi || norm <= 0.0f) continue;
        if (w.transposed) {
            backend->normalize_rows(norm, wv);
        } else {
            backend->normalize_columns(norm, wv);
        }
    }
}

}  // namespace sparsenet
