// Trainer: epochs, shuffling, minibatches, the finite-value guard, checkpoints and progress. What
// it asks of the network (a batch's gradients, the step, health probes, the parameters a
// checkpoint holds) is the network's training part, network_training.h; the passes live in
// network_passes.cpp.
#include "sparsenet/trainer.h"

#include <json/json.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <sstream>
#include <tuple>

#include "backend/out_of_memory.h"
#include "engine/host_rng.h"
#include "engine/network_bindings.h"
#include "engine/network_training.h"
#include "io/model_file.h"
#include "sparsenet/error.h"

namespace sparsenet {

namespace {
constexpr uint64_t kShuffleStream = 0x5AFF;
constexpr uint64_t kMaskStream = 0xD809;

using Clock = std::chrono::steady_clock;

// Batches between the host's looks at the device (the finite-value guard, the loss, the ranks'
// decisions) on a backend whose memory is not host memory. Each look is a full host-device
// synchronisation (and, under several ranks, a small all-reduce): every batch, they idled the
// GPU twice per step. At 16 a step of 1 ms pays one sync per 16 ms, while a divergence is still
// found at most 15 steps late (named exactly: the guard's flags of every batch stay on the
// device). The CPU backend looks after every batch: its "downloads" are memcpys, and its
// behaviour stays what it was. SPARSENET_SYNC_EVERY_BATCHES=N overrides both (N >= 1; tests run
// the windowed path on the CPU with it).
constexpr size_t kDeviceSyncEvery = 16;

size_t sync_every_for(const Backend& backend) {
    if (const char* v = std::getenv("SPARSENET_SYNC_EVERY_BATCHES"); v != nullptr && *v != '\0') {
        char* end = nullptr;
        const unsigned long n = std::strtoul(v, &end, 10);
        if (end != nullptr && *end == '\0' && n >= 1 && n <= 4096) return size_t(n);
        throw Error(ErrorCategory::kUsage, std::string("SPARSENET_SYNC_EVERY_BATCHES='") + v +
                                               "': expected a number of batches from 1 to 4096");
    }
    return backend.name() == "cpu" ? 1 : kDeviceSyncEvery;
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Exact text of a float (round-trips).
std::string exact(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

}  // namespace

struct Trainer::Impl {
    engine::Training net;  // the network's training part
    TrainOptions options;
    engine::BoundData data;
    DeviceArray<uint32_t> permutation;  // [rows]
    DeviceArray<double> loss_sum;       // [1]
    uint32_t epochs_done = 0;
    // Set by cancel() from any thread; read between batches, cleared by the epoch it stops.
    std::atomic<bool> cancel{false};
    // Where the last epoch stands (checkpoints): batches done of epoch epochs_done, all of them
    // when it is complete.
    uint64_t position = 0;
    bool position_complete = true;
    // resume(): the next train_epoch() continues epoch epochs_done from batch resume_batches
    // (> 0) with the epoch's summed loss resume_loss; fit() owes options.epochs - resumed_epochs.
    uint64_t resume_batches = 0;
    double resume_loss = 0.0;
    uint32_t resumed_epochs = 0;
    // Several ranks: the buffers of the per-batch all-reduces (loss and guard, decisions).
    DeviceArray<double> loss_and_flag;
    DeviceArray<uint32_t> decisions;
    // The windowed guard (sync_every > 1): per batch of the window, for every non-input layer in
    // forward order, the sums of squares of its bias gradient (the guard, as above), of its
    // activations of the batch and of its bias, and the epoch's loss sum after the batch. They
    // stay on the device until the window ends; then one download (after one all-reduce of each
    // under several ranks) finds the first non-finite batch.
    size_t sync_every = 1;
    DeviceArray<float> window_flags;  // [sync_every, checked layers, 3]
    DeviceArray<double> window_loss;  // [sync_every]
    struct PendingBatch {
        uint64_t number;    // 1-based within the epoch
        uint64_t examples;  // examples done after it
    };
    std::vector<PendingBatch> pending;
    Clock::time_point last_checkpoint = Clock::now();
    std::string last_checkpoint_text;  // "<path> (epoch E, batch B)" of the last one written

    Impl(Network& network, const std::map<std::string, const Dataset*>& datasets, TrainOptions opts)
        : net(network),
          options(std::move(opts)),
          data(network.impl(), datasets, /*with_outputs=*/true),
          permutation(net.backend(), data.rows(), "batch permutation"),
          loss_sum(net.backend(), 1, "loss accumulator") {
        if (options.batch == 0) throw Error(ErrorCategory::kUsage, "batch size must be positive");
        validate(options.optimizer);
        if (!(decay() >= 0.0f) || !std::isfinite(decay())) {
            throw Error(ErrorCategory::kUsage, "learning-rate decay " + std::to_string(decay()) +
                                                   " is out of range; expected a finite "
                                                   "number >= 0");
        }
        if (data.rows() == 0) throw Error(ErrorCategory::kData, "the training data has no rows");
        refuse_every_row_updates_of_wide_inputs();
        net.reserve(std::min<uint64_t>(options.batch, data.rows()),
                    data.max_input_nnz(options.batch));
        net.ensure_optimizer_state(options.optimizer.kind);
        // A new network's FixedWeights are fitted from this training data, before any step (a
        // resume() then overwrites them with the checkpoint's, as every parameter).
        if (net.fits_pending()) net.fit_fixed_weights(datasets);
        sync_every = sync_every_for(net.backend());
        if (net.data_parallel() && options.optimizer.sparse_update == SparseUpdate::kLazy) {
            throw Error(ErrorCategory::kNotImplemented,
                        "not implemented yet: lazy sparse updates under data parallelism (the "
                        "ranks sum whole gradients); use exact updates or --parallel model");
        }
    }

    float decay() const { return options.decay.value_or(net.config().decay); }

    // Exact sparse updates that walk every row of a sparse input's matrix each step (Adam,
    // AdamW, RMSProp, AdaDelta; AdaGrad and SGD with L1/L2; Momentum/Nesterov with L1, or L2
    // with Decay) are refused above kMaxEveryRowRows rows. Per weight the pass reads and writes
    // the weight and each state slot: 24 bytes with Adam. For a 256-wide first hidden layer, at
    // 2^21 = 2,097,152 rows that is 24 * 2^21 * 256 = 12.9 GB per step, 3.8 ms at an H100's
    // 3.35 TB/s: 44 % of the 8.6 ms a whole step of the 1,048,576-item autoencoder measured on
    // an H100 (docs/benchmarks.md), while the batch itself touches at most batch x nonzeros
    // rows; at 10,000,000 rows it is 61 GB (18 ms) per step, and on a CPU (about 20 GB/s) 0.64 s
    // per step already at 2^21 rows. Lazy updates (the touched rows only) cost what the batch
    // touches at any width.
    static constexpr uint64_t kMaxEveryRowRows = uint64_t(1) << 21;
    void refuse_every_row_updates_of_wide_inputs() const {
        const auto [rows, name] = net.every_row_sparse_matrix(options.optimizer, decay());
        if (rows <= kMaxEveryRowRows) return;
        const OptimizerOptions& o = options.optimizer;
        const double bytes = 8.0 * (1 + formulas::optimizer_state_slots(o.kind));
        throw Error(
            ErrorCategory::kUsage,
            std::string("exact sparse updates with ") + to_string(o.kind) +
                (o.l1 != 0.0f || o.l2 != 0.0f ? " and L1/L2" : "") + " would walk all " +
                std::to_string(rows) + " rows of " + name + " every step (" +
                std::to_string(int(bytes)) +
                " bytes per weight read and written), which dominates the step above " +
                std::to_string(kMaxEveryRowRows) +
                " rows; use --sparse-updates lazy (\"SparseUpdates\": \"Lazy\": the "
                "touched rows only), or Momentum/Nesterov (without L1, and without L2 under "
                "Decay), whose exact updates catch skipped rows up in closed form "
                "(docs/config-reference.md, \"Sparse "
                "updates\")");
    }

    void reset_loss() {
        const double zero = 0.0;
        loss_sum.upload(&zero, 1);
    }
    // The summed loss; reduce: of every rank (a split network's ranks each hold their columns'
    // part; data-parallel ranks their rows').
    double read_loss(bool reduce) {
        double v = 0.0;
        if (reduce && net.job_ranks() > 1) {
            DeviceArray<double> total(net.backend(), 1, "loss total");
            net.backend().copy(total.data(), loss_sum.data(), sizeof(double));
            net.comm().all_reduce(total.data(), 1, CommType::kFloat64, CommOp::kSum);
            total.download(&v, 1);
            return v;
        }
        loss_sum.download(&v, 1);
        return v;
    }

    // The summed loss of every rank and whether any rank's gradients are non-finite, in one
    // collective (nothing with one rank).
    std::pair<double, bool> loss_and_guard(bool check) {
        const double bad = check && net.local_gradients_nonfinite() ? 1.0 : 0.0;
        if (net.job_ranks() == 1) return {read_loss(false), bad > 0};
        if (loss_and_flag.size() < 2) {
            loss_and_flag = DeviceArray<double>(net.backend(), 2, "loss and finite check");
        }
        DeviceArray<double>& both = loss_and_flag;
        net.backend().copy(both.data(), loss_sum.data(), sizeof(double));
        net.backend().upload(both.data() + 1, &bad, sizeof(double));
        net.comm().all_reduce(both.data(), 2, CommType::kFloat64, CommOp::kSum);
        double host[2];
        both.download(host, 2);
        return {host[0], host[1] > 0};
    }

    // Collective over every rank of the job: whether any rank's flag is set, for each flag
    // (one small all-reduce; nothing with one rank). Every decision that changes which
    // collectives run next (stop, checkpoint) goes through it, so the ranks never diverge.
    std::vector<bool> agree(const std::vector<bool>& flags) {
        if (net.job_ranks() == 1) return flags;
        std::vector<uint32_t> v(flags.begin(), flags.end());
        if (decisions.size() < v.size()) {
            decisions = DeviceArray<uint32_t>(net.backend(), v.size(), "decision flags");
        }
        DeviceArray<uint32_t>& buf = decisions;
        buf.upload(v.data(), v.size());
        net.comm().all_reduce(buf.data(), v.size(), CommType::kUint32, CommOp::kMax);
        buf.download(v.data(), v.size());
        return std::vector<bool>(v.begin(), v.end());
    }

    // Windowed guard: the flags and the loss of the batch in window slot `slot`, on the device.
    void record_batch(size_t slot, size_t rows) {
        const size_t per_batch = std::max<size_t>(net.checked_layers(), 1) * 3;
        if (window_flags.size() < sync_every * per_batch) {
            window_flags =
                DeviceArray<float>(net.backend(), sync_every * per_batch, "finite check");
            window_loss = DeviceArray<double>(net.backend(), sync_every, "loss after each batch");
        }
        net.record_health(window_flags.data() + slot * per_batch, rows);
        net.backend().copy(window_loss.data() + slot, loss_sum.data(), sizeof(double));
    }

    // Windowed guard, collective: the first batch of the window whose loss or bias gradients are
    // not finite (Error(kNumeric) naming the epoch, that batch and the first layer, in forward
    // order, whose activations of that batch or bias were not finite); then on_batch for every
    // batch of the window, in order. One synchronisation for the whole window.
    void check_window(uint32_t epoch, uint64_t batches, Clock::time_point start) {
        if (pending.empty()) return;
        const size_t layers = net.checked_layers();
        const size_t per_batch = std::max<size_t>(layers, 1) * 3, count = pending.size();
        if (net.job_ranks() > 1) {
            // Sums over the ranks keep a NaN or an infinity (the terms are squares: >= 0).
            net.comm().all_reduce(window_flags.data(), count * per_batch, CommType::kFloat32,
                                  CommOp::kSum);
            net.comm().all_reduce(window_loss.data(), count, CommType::kFloat64, CommOp::kSum);
        }
        std::vector<float> flags(count * per_batch);
        std::vector<double> losses(count);
        window_flags.download(flags.data(), flags.size());
        window_loss.download(losses.data(), count);
        for (size_t i = 0; i < count && options.check_finite; ++i) {
            const float* f = flags.data() + i * per_batch;
            bool grads_bad = false;
            for (size_t k = 0; k < layers; ++k) grads_bad |= !std::isfinite(f[3 * k]);
            const double loss = losses[i];
            if (!grads_bad && std::isfinite(loss)) continue;
            // A sum of squares is NaN exactly when a value is NaN (squares are >= 0), so NaNs are
            // located exactly; an infinite sum is an infinity or values beyond about 1e19 whose
            // squares overflow, named as such.
            std::string where =
                "no activation or bias of that batch is non-finite (the loss or "
                "the gradients overflowed, or weights into a layer are non-finite "
                "while its activations stayed finite)";
            bool found = false;
            for (int pass = 0; pass < 2 && !found; ++pass) {
                for (size_t k = 0; k < layers && !found; ++k) {
                    for (int q : {2, 1}) {  // the bias, then the activations it feeds
                        const float v = f[3 * k + q];
                        if (pass == 0 ? !std::isnan(v) : std::isfinite(v)) continue;
                        where = std::string(pass == 0 ? "the first NaN values of that batch are in "
                                                      : "the first infinite or overflowing "
                                                        "(beyond about 1e19) values of that batch "
                                                        "are in ") +
                                (q == 2 ? "the bias of" : "the activations of") + " layer '" +
                                net.checked_layer_name(k) + "'";
                        found = true;
                        break;
                    }
                }
            }
            const PendingBatch& bad = pending[i];
            std::string text =
                "training diverged at epoch " + std::to_string(epoch) + ", batch " +
                std::to_string(bad.number) + " of " + std::to_string(batches) + ": " +
                (std::isfinite(loss) ? std::string("the gradients are not finite")
                 : std::isnan(loss)  ? std::string("the loss is NaN")
                                     : std::string("the loss is infinite")) +
                "; " + where + " (found after batch " + std::to_string(pending.back().number) +
                ": this device is checked every " + std::to_string(sync_every) +
                " batches, SPARSENET_SYNC_EVERY_BATCHES=1 checks every batch before its update "
                "and names the weights too). ";
            text += last_checkpoint_text.empty()
                        ? "No checkpoint was written in this run."
                        : "The last good checkpoint is " + last_checkpoint_text + ".";
            text += " Lower the learning rate, or check the data for extreme values.";
            pending.clear();
            throw Error(ErrorCategory::kNumeric, text);
        }
        if (options.on_batch) {
            for (size_t i = 0; i < count; ++i) {
                BatchProgress p;
                p.epoch = epoch;
                p.batch = pending[i].number;
                p.batches = batches;
                p.examples = pending[i].examples;
                p.loss = losses[i] / double(p.examples);
                p.seconds = seconds_since(start);
                options.on_batch(p);
            }
        }
        pending.clear();
    }

    // The training options a resumed run must share with the checkpoint, as text by name.
    std::vector<std::pair<std::string, std::string>> fingerprint() const {
        const OptimizerOptions& o = options.optimizer;
        return {
            {"rows", std::to_string(data.rows())},
            {"batch", std::to_string(options.batch)},
            {"seed", std::to_string(options.seed)},
            {"shuffle", options.shuffle.value_or(net.config().shuffle_indices) ? "true" : "false"},
            {"optimizer", to_string(o.kind)},
            {"learning_rate", exact(o.learning_rate)},
            {"mu", exact(o.mu)},
            {"mu1", exact(o.mu1)},
            {"epsilon", exact(o.epsilon.value_or(default_epsilon(o.kind)))},
            {"l2", exact(o.l2)},
            {"l1", exact(o.l1)},
            {"sparse_update", to_string(o.sparse_update)},
            {"decay", exact(decay())}};
    }
    std::string fingerprint_json() const {
        Json::Value v(Json::objectValue);
        for (const auto& [key, value] : fingerprint()) v[key] = value;
        Json::StreamWriterBuilder w;
        w["indentation"] = "";
        return Json::writeString(w, v);
    }

    void make_permutation(uint32_t epoch) {
        std::vector<uint32_t> perm(data.rows());
        std::iota(perm.begin(), perm.end(), 0u);
        if (options.shuffle.value_or(net.config().shuffle_indices)) {
            engine::HostRng rng(formulas::derive_seed(options.seed, epoch, kShuffleStream));
            for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
        }
        permutation.upload(perm.data(), perm.size());
    }
};

Trainer::Trainer(Network& network, const std::map<std::string, const Dataset*>& datasets,
                 TrainOptions options)
    : impl_(host_memory_guard("uploading the training data", [&] {
          return std::make_unique<Impl>(network, datasets, std::move(options));
      })) {}

Trainer::~Trainer() = default;

uint32_t Trainer::epochs_done() const {
    return impl_->epochs_done;
}

uint32_t Trainer::epochs_complete() const {
    return impl_->position_complete ? impl_->epochs_done : impl_->epochs_done - 1;
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
    const bool resuming = t.resume_batches > 0;
    if (!resuming && t.agree({t.cancel.exchange(false)})[0]) {
        // cancelled before this epoch began: nothing runs
        stats.epoch = t.epochs_done;
        stats.complete = false;
        return stats;
    }
    const uint32_t epoch = resuming ? t.epochs_done : ++t.epochs_done;
    const auto start = Clock::now();
    t.make_permutation(epoch);
    t.reset_loss();
    t.pending.clear();  // a window an exception interrupted is not this epoch's
    const uint64_t mask_seed = formulas::derive_seed(t.options.seed, epoch, kMaskStream);
    const uint64_t rows = t.data.rows();
    const uint64_t batches = (rows + t.options.batch - 1) / t.options.batch;
    uint64_t done = 0;
    if (resuming) {  // the checkpoint's batches are done, its loss so far summed
        done = t.resume_batches;
        t.loss_sum.upload(&t.resume_loss, 1);
        t.resume_batches = 0;
    }
    const uint64_t resumed_at = done;
    t.position = done;
    t.position_complete = false;
    bool cancelled = false, checkpoint_at_end = false;
    // A batch always finishes its forward, backward and optimizer step: a cancelled network
    // holds the weights after `done` whole steps. The ranks agree after every batch on stopping
    // and on writing a time-based checkpoint.
    while (done < batches && !cancelled) {
        const uint64_t first = done * t.options.batch;
        BatchRows batch{t.permutation.data() + first, 0,
                        static_cast<size_t>(std::min<uint64_t>(t.options.batch, rows - first))};
        t.net.compute_batch_gradients(t.data.bindings(), batch, mask_seed, t.loss_sum.data());
        if (t.sync_every > 1) {
            // Windowed: the guard's flags and the loss stay on the device; the host looks every
            // sync_every batches, at the epoch's end and before a checkpoint (check_window).
            const size_t share = t.net.share_of(batch);
            t.record_batch(t.pending.size(), share);
            t.net.update(t.options.optimizer, t.decay());
            ++done;
            t.position = done;
            t.pending.push_back({done, first + batch.batch});
            if (t.pending.size() < t.sync_every && done < batches) continue;
            t.check_window(epoch, batches, start);
            const bool timed = !t.options.checkpoint.empty() && t.options.checkpoint_seconds > 0 &&
                               seconds_since(t.last_checkpoint) >= t.options.checkpoint_seconds;
            const std::vector<bool> agreed = t.agree({t.cancel.load(), timed});
            if (agreed[1]) {
                if (done < batches) {
                    save_checkpoint(t.options.checkpoint);
                } else {
                    checkpoint_at_end = true;
                }
            }
            cancelled = agreed[0] && done < batches;
            continue;
        }
        double loss = 0.0;
        bool nonfinite = false;
        if (t.options.check_finite || t.options.on_batch) {
            std::tie(loss, nonfinite) = t.loss_and_guard(t.options.check_finite);
        }
        if (t.options.check_finite && (nonfinite || !std::isfinite(loss))) {
            // Before the update: the parameters are still those of the last good step.
            const size_t share = t.net.share_of(batch);
            std::string text = "training diverged at epoch " + std::to_string(epoch) + ", batch " +
                               std::to_string(done + 1) + " of " + std::to_string(batches) + ": " +
                               (std::isfinite(loss) ? std::string("the gradients are not finite")
                                : std::isnan(loss)  ? std::string("the loss is NaN")
                                                    : std::string("the loss is infinite")) +
                               "; " + t.net.locate_nonfinite(share) + ". ";
            text += t.last_checkpoint_text.empty()
                        ? "No checkpoint was written in this run."
                        : "The last good checkpoint is " + t.last_checkpoint_text + ".";
            text += " Lower the learning rate, or check the data for extreme values.";
            throw Error(ErrorCategory::kNumeric, text);
        }
        t.net.update(t.options.optimizer, t.decay());
        ++done;
        t.position = done;
        if (t.options.on_batch) {
            BatchProgress p;
            p.epoch = epoch;
            p.batch = done;
            p.batches = batches;
            p.examples = first + batch.batch;
            p.loss = loss / double(p.examples);
            p.seconds = seconds_since(start);
            t.options.on_batch(p);
        }
        const bool timed = !t.options.checkpoint.empty() && t.options.checkpoint_seconds > 0 &&
                           seconds_since(t.last_checkpoint) >= t.options.checkpoint_seconds;
        const std::vector<bool> agreed = t.agree({t.cancel.load(), timed});
        if (agreed[1]) {
            if (done < batches) {
                save_checkpoint(t.options.checkpoint);
            } else {
                checkpoint_at_end = true;
            }
        }
        cancelled = agreed[0] && done < batches;
    }
    if (cancelled) t.cancel.store(false);  // this epoch consumed the request
    t.net.catch_up_all();                  // validation, callbacks and files read every row
    t.position_complete = !cancelled;
    t.net.backend().synchronize();
    stats.epoch = epoch;
    stats.batches = done;
    stats.complete = !cancelled;
    stats.examples = std::min<uint64_t>(done * t.options.batch, rows);
    stats.loss = stats.examples > 0 ? t.read_loss(true) / double(stats.examples) : 0.0;
    stats.seconds = seconds_since(start);
    // The rate of the batches this call ran (a resumed epoch's earlier ones excluded).
    const double ran =
        double(stats.examples - std::min(stats.examples, resumed_at * t.options.batch));
    stats.examples_per_second = stats.seconds > 0 ? ran / stats.seconds : 0.0;
    if (!cancelled) {
        if (t.options.check_finite && !std::isfinite(stats.loss)) {
            throw Error(ErrorCategory::kNumeric, "training diverged in epoch " +
                                                     std::to_string(epoch) +
                                                     ": the epoch's loss is not finite");
        }
        if (t.options.on_epoch) t.options.on_epoch(stats);
        const bool every =
            t.options.checkpoint_every > 0 && epoch % t.options.checkpoint_every == 0;
        if (!t.options.checkpoint.empty() && (every || checkpoint_at_end)) {
            save_checkpoint(t.options.checkpoint);
        }
    }
    return stats;
}

void Trainer::save_checkpoint(const std::string& path) {
    host_memory_guard("writing a checkpoint", [&] {
        Impl& t = *impl_;
        const auto start = Clock::now();
        io::ModelTrainingState state;
        state.optimizer = to_string(t.net.state_kind());
        state.optimizer_steps = t.net.optimizer_steps();
        // A complete epoch is a boundary; a partial one (cancelled, or a timed checkpoint inside
        // it) resumes at its next batch.
        state.epochs_complete = epochs_complete();
        state.batches_done = t.position_complete ? 0 : t.position;
        state.loss_sum = state.batches_done > 0 ? t.read_loss(true) : 0.0;
        state.options = t.fingerprint_json();
        if (t.options.checkpoint_notes) state.notes = t.options.checkpoint_notes();
        for (const auto& [key, value] : state.notes) {
            const bool valid = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
                return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
            });
            if (!valid) {
                throw Error(
                    ErrorCategory::kUsage,
                    "checkpoint note key '" + key + "' is invalid; expected letters, digits and _");
            }
        }
        // Only finite parameters are written: the previous checkpoint stays the last good one.
        if (t.options.check_finite) {
            const std::string bad = t.net.nonfinite_parameters();
            if (!bad.empty()) {
                throw Error(ErrorCategory::kNumeric,
                            "not writing the checkpoint " + path + ": " + bad);
            }
        }
        t.net.write_file(path, state);
        t.last_checkpoint = Clock::now();
        t.last_checkpoint_text = path + " (" + std::to_string(state.epochs_complete) +
                                 " epochs and " + std::to_string(state.batches_done) + " batches)";
        if (t.options.on_checkpoint) {
            CheckpointInfo info;
            info.path = path;
            info.epochs_complete = state.epochs_complete;
            info.batches_done = state.batches_done;
            info.seconds = seconds_since(start);
            t.options.on_checkpoint(info);
        }
    });
}

std::map<std::string, std::string> Trainer::resume(const std::string& path) {
    Impl& t = *impl_;
    const io::ModelReader file(path, /*training_state=*/true);  // each rank reads its blocks
    const io::ModelTrainingState& state = *file.layout().training;
    if (file.layout().config.to_json() != t.net.config().to_json()) {
        throw Error(ErrorCategory::kUsage,
                    path +
                        ": the checkpoint's network config differs from this network's; "
                        "resume with the network loaded from the checkpoint");
    }
    // The options it was written with, compared by name.
    Json::Value saved;
    Json::CharReaderBuilder reader;
    std::string errors;
    std::istringstream in(state.options);
    if (!Json::parseFromStream(reader, in, &saved, &errors) || !saved.isObject()) {
        throw Error(ErrorCategory::kIo,
                    path + ": checkpoint_options is not a JSON object: " + errors);
    }
    for (const auto& [key, value] : t.fingerprint()) {
        const std::string was = saved.isMember(key) && saved[key].isString()
                                    ? saved[key].asString()
                                    : std::string("(missing)");
        if (was != value) {
            throw Error(ErrorCategory::kUsage,
                        path + ": the checkpoint was written with " + key + " = " + was +
                            "; this run has " + key + " = " + value +
                            " (a resumed run needs the checkpoint's data rows and training "
                            "options)");
        }
    }
    const uint64_t batches = (t.data.rows() + t.options.batch - 1) / t.options.batch;
    if (state.batches_done >= batches) {
        throw Error(ErrorCategory::kIo,
                    path + ": checkpoint position batch " + std::to_string(state.batches_done) +
                        " is past the epoch's " + std::to_string(batches) + " batches");
    }
    // state.optimizer equals options.optimizer.kind (the fingerprint checked it).
    t.net.ensure_optimizer_state(t.options.optimizer.kind);
    t.net.restore(file, state.optimizer_steps);
    t.resumed_epochs = state.epochs_complete;
    if (state.batches_done > 0) {
        t.epochs_done = state.epochs_complete + 1;
        t.resume_batches = state.batches_done;
        t.resume_loss = state.loss_sum;
        t.position = state.batches_done;
        t.position_complete = false;
    } else {
        t.epochs_done = state.epochs_complete;
        t.resume_batches = 0;
        t.position_complete = true;
    }
    t.last_checkpoint = Clock::now();
    t.last_checkpoint_text = path + " (" + std::to_string(state.epochs_complete) + " epochs and " +
                             std::to_string(state.batches_done) + " batches)";
    return state.notes;
}

std::vector<EpochStats> Trainer::fit() {
    std::vector<EpochStats> all;
    // After resume(): the epochs the checkpoint holds count towards options.epochs.
    const uint32_t owed = impl_->options.epochs > impl_->resumed_epochs
                              ? impl_->options.epochs - impl_->resumed_epochs
                              : 0;
    impl_->resumed_epochs = 0;
    for (uint32_t e = 0; e < owed; ++e) {
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
    t.net.reserve(count, t.data.max_input_nnz(count));
    BatchRows batch{nullptr, first_row, count};
    t.reset_loss();
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
    t.net.reserve(count, t.data.max_input_nnz(count));
    BatchRows batch{nullptr, first_row, count};
    return t.net.parameter_gradients(t.data.bindings(), batch);
}

}  // namespace sparsenet
