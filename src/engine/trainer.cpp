// Trainer: epochs, shuffling, minibatches, progress; the passes live in passes.cpp.
#include "sparsenet/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>

#include "engine/bindings.h"
#include "engine/host_rng.h"
#include "engine/network_impl.h"
#include "sparsenet/error.h"

namespace sparsenet {

namespace {
constexpr uint64_t kShuffleStream = 0x5AFF;
constexpr uint64_t kMaskStream = 0xD809;
}  // namespace

struct Trainer::Impl {
    Network::Impl& net;
    TrainOptions options;
    engine::BoundData data;
    DeviceArray<uint32_t> permutation;  // [rows]
    DeviceArray<double> loss_sum;       // [1]
    uint32_t epochs_done = 0;
    // Set by cancel() from any thread; read between batches, cleared by the epoch it stops.
    std::atomic<bool> cancel{false};

    Impl(Network& network, const std::map<std::string, const Dataset*>& datasets, TrainOptions opts)
        : net(network.impl()),
          options(std::move(opts)),
          data(network.impl(), datasets, /*with_outputs=*/true),
          permutation(*net.backend, data.rows(), "batch permutation"),
          loss_sum(*net.backend, 1, "loss accumulator") {
        if (options.batch == 0) throw Error(ErrorCategory::kUsage, "batch size must be positive");
        validate(options.optimizer);
        if (!(decay() >= 0.0f) || !std::isfinite(decay())) {
            throw Error(ErrorCategory::kUsage, "learning-rate decay " + std::to_string(decay()) +
                                                   " is out of range; expected a finite "
                                                   "number >= 0");
        }
        if (data.rows() == 0) throw Error(ErrorCategory::kData, "the training data has no rows");
        net.ensure_batch_capacity(std::min<uint64_t>(options.batch, data.rows()));
        net.ensure_sparse_capacity(data.max_input_nnz(options.batch));
        net.ensure_optimizer_state(options.optimizer.kind);
        if (net.data_parallel && options.optimizer.sparse_update == SparseUpdate::kLazy) {
            throw Error(ErrorCategory::kNotImplemented,
                        "not implemented yet: lazy sparse updates under data parallelism (the "
                        "ranks sum whole gradients); use exact updates or --parallel model");
        }
    }

    float decay() const { return options.decay.value_or(net.config.decay); }

    void reset_loss() {
        const double zero = 0.0;
        loss_sum.upload(&zero, 1);
    }
    // The summed loss; reduce: of every rank (a split network's ranks each hold their columns'
    // part; data-parallel ranks their rows').
    double read_loss(bool reduce) {
        double v = 0.0;
        if (reduce && net.job_ranks > 1) {
            DeviceArray<double> total(*net.backend, 1, "loss total");
            net.backend->copy(total.data(), loss_sum.data(), sizeof(double));
            net.comm->all_reduce(total.data(), 1, CommType::kFloat64, CommOp::kSum);
            total.download(&v, 1);
            return v;
        }
        loss_sum.download(&v, 1);
        return v;
    }

    void make_permutation(uint32_t epoch) {
        std::vector<uint32_t> perm(data.rows());
        std::iota(perm.begin(), perm.end(), 0u);
        if (options.shuffle.value_or(net.config.shuffle_indices)) {
            engine::HostRng rng(formulas::derive_seed(options.seed, epoch, kShuffleStream));
            for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
        }
        permutation.upload(perm.data(), perm.size());
    }
};

Trainer::Trainer(Network& network, const std::map<std::string, const Dataset*>& datasets,
                 TrainOptions options)
    : impl_(std::make_unique<Impl>(network, datasets, std::move(options))) {}

Trainer::~Trainer() = default;

uint32_t Trainer::epochs_done() const {
    return impl_->epochs_done;
}

void Trainer::cancel() noexcept {
    impl_->cancel.store(true);
}

bool Trainer::cancel_requested() const noexcept {
    return impl_->cancel.load();
}

EpochStats Trainer::train_epoch() {
    Impl& t = *impl_;
    EpochStats stats;
    if (t.cancel.exchange(false)) {  // cancelled before this epoch began: nothing runs
        stats.epoch = t.epochs_done;
        stats.complete = false;
        return stats;
    }
    const uint32_t epoch = ++t.epochs_done;
    const auto start = std::chrono::steady_clock::now();
    t.make_permutation(epoch);
    t.reset_loss();
    const uint64_t mask_seed = formulas::derive_seed(t.options.seed, epoch, kMaskStream);
    const uint64_t rows = t.data.rows();
    const uint64_t batches = (rows + t.options.batch - 1) / t.options.batch;
    uint64_t done = 0;
    // Checked before each batch, never inside one: a batch always finishes its forward, backward
    // and optimizer step, so a cancelled network holds the weights after `done` whole steps.
    while (done < batches && !t.cancel.load()) {
        const uint64_t first = done * t.options.batch;
        BatchRows batch{t.permutation.data() + first, 0,
                        static_cast<size_t>(std::min<uint64_t>(t.options.batch, rows - first))};
        if (t.net.data_parallel) {
            // This rank's share of the batch; the gradients of every share are summed.
            const size_t P = size_t(t.net.job_ranks), r = size_t(t.net.job_rank);
            const size_t lo = batch.batch * r / P, hi = batch.batch * (r + 1) / P;
            const BatchRows share{batch.rows + lo, 0, hi - lo};
            t.net.loss_batch = batch.batch;
            if (share.batch > 0) {
                t.net.forward(t.data.bindings(), share, true, mask_seed);
                t.net.backward(t.data.bindings(), share, true, mask_seed, t.loss_sum.data());
            } else {
                t.net.zero_gradients();
            }
            t.net.loss_batch = 0;
            t.net.all_reduce_gradients();
        } else {
            t.net.forward(t.data.bindings(), batch, true, mask_seed);
            t.net.backward(t.data.bindings(), batch, true, mask_seed, t.loss_sum.data());
        }
        t.net.update(t.options.optimizer, t.decay());
        ++done;
        if (t.options.on_batch) {
            BatchProgress p;
            p.epoch = epoch;
            p.batch = done;
            p.batches = batches;
            p.examples = first + batch.batch;
            p.loss = t.read_loss(true) / double(p.examples);
            p.seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            t.options.on_batch(p);
        }
    }
    const bool cancelled = done < batches;
    if (cancelled) t.cancel.store(false);  // this epoch consumed the request
    t.net.backend->synchronize();
    stats.epoch = epoch;
    stats.batches = done;
    stats.complete = !cancelled;
    stats.examples = std::min<uint64_t>(done * t.options.batch, rows);
    stats.loss = stats.examples > 0 ? t.read_loss(true) / double(stats.examples) : 0.0;
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats.examples_per_second = stats.seconds > 0 ? double(stats.examples) / stats.seconds : 0.0;
    if (!cancelled && t.options.on_epoch) t.options.on_epoch(stats);
    return stats;
}

std::vector<EpochStats> Trainer::fit() {
    std::vector<EpochStats> all;
    for (uint32_t e = 0; e < impl_->options.epochs; ++e) {
        EpochStats stats = train_epoch();
        if (!stats.complete && stats.batches == 0) break;  // cancelled before it began
        all.push_back(stats);
        if (!stats.complete) break;
        if (impl_->options.early_stop && impl_->options.early_stop(stats)) break;
    }
    return all;
}

double Trainer::compute_loss(uint64_t first_row, uint32_t count) {
    Impl& t = *impl_;
    if (count == 0 || first_row + count > t.data.rows()) {
        throw Error(ErrorCategory::kUsage, "rows out of range");
    }
    t.net.ensure_batch_capacity(count);
    t.net.ensure_sparse_capacity(t.data.max_input_nnz(count));
    BatchRows batch{nullptr, first_row, count};
    t.reset_loss();
    t.net.forward(t.data.bindings(), batch, false, 0);
    t.net.add_losses(t.data.bindings(), batch, t.loss_sum.data());
    // Every rank computed all of these rows (data parallelism) or its columns of them (model).
    return t.read_loss(t.net.split()) / double(count);
}

double Trainer::evaluate_loss() {
    const uint64_t rows = impl_->data.rows();
    const uint32_t step = std::max<uint32_t>(1, impl_->options.batch);
    double total = 0.0;
    for (uint64_t first = 0; first < rows; first += step) {
        const auto count = static_cast<uint32_t>(std::min<uint64_t>(step, rows - first));
        total += compute_loss(first, count) * count;
    }
    return total / double(rows);
}

std::map<std::string, std::vector<float>> Trainer::compute_gradients(uint64_t first_row,
                                                                     uint32_t count) {
    Impl& t = *impl_;
    if (count == 0 || first_row + count > t.data.rows()) {
        throw Error(ErrorCategory::kUsage, "rows out of range");
    }
    t.net.ensure_batch_capacity(count);
    t.net.ensure_sparse_capacity(t.data.max_input_nnz(count));
    BatchRows batch{nullptr, first_row, count};
    t.net.forward(t.data.bindings(), batch, false, 0);
    t.net.backward(t.data.bindings(), batch, false, 0, nullptr);
    std::map<std::string, std::vector<float>> grads;
    for (size_t wi = 0; wi < t.net.weights.size(); ++wi) {
        const engine::Weight& w = t.net.weights[wi];
        if (w.owner != static_cast<int>(wi)) continue;  // a shared matrix: one entry, its owner's
        grads[t.net.weight_name(w)] = t.net.assemble_weight(
            static_cast<int>(wi), t.net.weight_gradient(static_cast<int>(wi)));
    }
    for (size_t l = 0; l < t.net.layers.size(); ++l) {
        engine::Layer& layer = t.net.layers[l];
        if (layer.is_input()) continue;
        std::vector<float> g(layer.n_local, 0.0f);
        if (layer.reaches_output) layer.bias_grad.download(g.data(), g.size());
        grads["bias:" + layer.config.name] = t.net.assemble_bias(static_cast<int>(l), std::move(g));
    }
    return grads;
}

}  // namespace sparsenet
