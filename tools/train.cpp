// sparsenet train: JSON network + netCDF datasets -> trained model file.
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "args.h"
#include "common.h"
#include "progress.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "sparsenet/job.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "validation.h"

namespace sparsenet::cli {

namespace {

// SIGINT / SIGTERM while checkpointing: the trainer stops after the batch in progress, the
// checkpoint is written and train exits with 128 + the signal. A second signal acts as usual.
std::atomic<Trainer*> g_trainer{nullptr};
std::atomic<int> g_signal{0};
static_assert(std::atomic<Trainer*>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

extern "C" void stop_training(int sig) {
    g_signal.store(sig);
    std::signal(sig, SIG_DFL);
    if (Trainer* t = g_trainer.load()) t->cancel();  // an atomic store: async-signal-safe
}

// A process killed while writing `path` leaves its temporary file `<path>.tmp.<pid>.<n>`
// (io::write_model), never read. Removes those whose process is gone from this machine.
void remove_stale_temporaries(const std::string& path, bool quiet) {
    namespace fs = std::filesystem;
    const fs::path p(path);
    const std::string prefix = p.filename().string() + ".tmp.";
    std::error_code ec;
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        char* end = nullptr;
        const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
        if (pid <= 0 || end == nullptr || *end != '.') continue;
        if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours
        if (fs::remove(entry.path(), ec) && !quiet) {
            std::printf("removed %s (left by a process that was killed while writing)\n",
                        entry.path().c_str());
        }
    }
}

// The validation's best epoch travels in the checkpoint's notes (a resumed --keep-best run
// replaces the kept model only with a better one).
constexpr const char* kBestEpoch = "keep_best_epoch";
constexpr const char* kBestValue = "keep_best_value";

}  // namespace

int train_main(int argc, char** argv) {
    return run_command("train", [&]() {
        std::string config_path, input_path, output_path, model_path, device = "auto", metrics_path,
                                                                      precision;
        std::string comm = "auto", parallel = "auto";
        std::string optimizer, sparse_updates;
        std::string validate_input, validate_target, validate_k = "20", keep_best;
        std::string checkpoint_path;
        uint32_t checkpoint_every = 0;
        double checkpoint_minutes = 0.0;
        bool resume = false;
        std::vector<std::string> extra;
        // Flag values; each overrides the config's Training section (or Decay) only when given.
        TrainOptions flags;
        float epsilon = 0.0f, decay = 0.0f;
        int threads = 0;
        bool quiet = false, no_shuffle = false, dry_run = false;
        int plan_ranks = 0;
        uint32_t max_steps = 0;
        ArgParser args("train",
                       "Trains a network defined in DSSTNE's JSON language on sparse netCDF "
                       "datasets and writes the model file. Training options come from the "
                       "config's Training section (and Decay); the flags below override them.");
        args.add({"-c", "--config"}, &config_path, "FILE.json", "network definition", true);
        args.add({"-i", "--input"}, &input_path, "FILE.nc", "input dataset file", true);
        args.add({"-o", "--output"}, &output_path, "FILE.nc",
                 "output (target) dataset file; may be the input file");
        args.add_list({"--data"}, &extra, "FILE.nc", "another dataset file (repeatable)");
        args.add({"-n", "--model"}, &model_path, "FILE.nc", "model file to write", true);
        args.add({"-b", "--batch"}, &flags.batch, "N", "minibatch size (default 1024)");
        args.add({"-e", "--epochs"}, &flags.epochs, "N", "epochs (default 40)");
        args.add({"--steps"}, &max_steps, "N",
                 "stop after this run's N-th optimizer step (within -e's epochs) and write the "
                 "model then, as at the end");
        args.add({"--optimizer"}, &optimizer, "NAME",
                 "sgd | momentum | nesterov | adagrad | rmsprop | adadelta | adam | adamw "
                 "(default sgd)");
        args.add({"--learning-rate", "-alpha"}, &flags.optimizer.learning_rate, "F",
                 "learning rate alpha (default 0.025)");
        args.add({"--mu", "-mu", "--momentum", "--beta1"}, &flags.optimizer.mu, "F",
                 "DSSTNE's mu: momentum (momentum, nesterov), moving-average rate (rmsprop, "
                 "adadelta) or beta1 (adam, adamw) (default 0.9)");
        args.add({"--mu1", "-mu1", "--beta2"}, &flags.optimizer.mu1, "F",
                 "DSSTNE's mu1: beta2 of adam and adamw (default 0.999)");
        args.add({"--l2", "-lambda"}, &flags.optimizer.l2, "F",
                 "L2 regularisation lambda (default 0; decoupled in adamw)");
        args.add({"--l1", "-lambda1"}, &flags.optimizer.l1, "F",
                 "L1 regularisation lambda1 (default 0; decoupled in adamw)");
        args.add({"--epsilon"}, &epsilon, "F",
                 "epsilon (default 1e-8 for adam/adamw, 1e-9 for adagrad/rmsprop/adadelta)");
        args.add({"--decay"}, &decay, "F",
                 "learning-rate decay: alpha / (1 + decay * (step - 1)) (default: the config's "
                 "Decay, else 0)");
        args.add({"--sparse-updates"}, &sparse_updates, "MODE",
                 "exact | lazy: how untouched rows of sparse-input weights are updated (default "
                 "exact)");
        args.add({"--seed"}, &flags.seed, "N",
                 "seed of weights, shuffling and dropout (default 12134)");
        args.add_flag({"--no-shuffle"}, &no_shuffle,
                      "keep the example order (overrides "
                      "ShuffleIndices)");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add({"--device"}, &device, "DEV", "auto | cpu | cuda[:N] (default auto)");
        bool share_gpus = false;
        args.add_flag({"--share-gpus"}, &share_gpus, kShareGpusHelp);
        args.add({"--precision"}, &precision, "P", kPrecisionHelp);
        args.add({"--comm"}, &comm, "KIND",
                 "auto | local | mpi | nccl: the ranks that split every layer under mpirun "
                 "(default auto: every rank of the job; docs/parallelism.md)");
        args.add({"--parallel"}, &parallel, "MODE",
                 "model | data | auto: split every layer's weights across the ranks, or give "
                 "each rank its share of every batch and sum the gradients; auto takes the one "
                 "that moves fewer bytes per step (default auto)");
        args.add({"--metrics-out"}, &metrics_path, "FILE", "per-epoch metrics as JSON lines");
        args.add({"--validate-input"}, &validate_input, "FILE.nc",
                 "validation rows' known items: after each epoch, rank every item for them "
                 "(these items excluded) and score against --validate-target");
        args.add({"--validate-target"}, &validate_target, "FILE.nc",
                 "validation rows' held-out items (with --validate-input)");
        args.add({"--validate-k"}, &validate_k, "K[,K...]", "validation cut-offs (default 20)");
        args.add({"--keep-best"}, &keep_best, "METRIC@K",
                 "write the model of the epoch with the best validation METRIC@K (recall, "
                 "nrecall, precision, ndcg, map, hit_rate, coverage), e.g. recall@20");
        args.add({"--checkpoint"}, &checkpoint_path, "FILE",
                 "checkpoint file: model, optimizer state and position, replaced atomically "
                 "(default: the model file's name + .checkpoint)");
        args.add({"--checkpoint-every"}, &checkpoint_every, "N",
                 "write a checkpoint after every N-th epoch");
        args.add({"--checkpoint-minutes"}, &checkpoint_minutes, "M",
                 "also write one after the first batch ending M minutes after the last one");
        args.add_flag({"--resume"}, &resume,
                      "continue from the checkpoint (its weights, optimizer state, epoch and "
                      "batch) with the same data and options; -e counts every epoch, the "
                      "checkpoint's included");
        args.add_flag({"--dry-run"}, &dry_run,
                      "print the model-parallel plan (splits, collectives, bytes per step) "
                      "and the memory plan for one device and per rank, from the datasets' "
                      "headers, and stop; writes nothing");
        args.add({"--ranks"}, &plan_ranks, "N",
                 "ranks the --dry-run plan is for (default: this job's ranks, 1 without mpirun)");
        args.add_flag({"-q", "--quiet"}, &quiet, "print nothing but errors");
        bool verbose_flag = false;
        args.add_flag({"-v", "--verbose"}, &verbose_flag,
                      "also say which device --device auto took when it is the CPU of a machine "
                      "without an NVIDIA GPU");
        if (!args.parse(argc, argv)) return 0;
        (void)precision_option(precision);  // a bad value fails before any file is read
        // Each rank's GPU, and the refusal of more ranks than GPUs on a node, before any file is
        // read or anything allocated (a dry run touches no device: its plan is for any).
        if (!dry_run) check_rank_device(device, share_gpus);

        const NetworkConfig config = NetworkConfig::from_file(config_path);
        TrainOptions options = train_options(config);
        OptimizerOptions& opt = options.optimizer;
        if (args.given("--optimizer")) opt.kind = optimizer_from_string(optimizer);
        if (args.given("--sparse-updates"))
            opt.sparse_update = sparse_update_from_string(sparse_updates);
        if (args.given("-b")) options.batch = flags.batch;
        if (args.given("-e")) options.epochs = flags.epochs;
        if (args.given("--learning-rate")) opt.learning_rate = flags.optimizer.learning_rate;
        if (args.given("--mu")) opt.mu = flags.optimizer.mu;
        if (args.given("--mu1")) opt.mu1 = flags.optimizer.mu1;
        if (args.given("--l2")) opt.l2 = flags.optimizer.l2;
        if (args.given("--l1")) opt.l1 = flags.optimizer.l1;
        if (args.given("--epsilon")) opt.epsilon = epsilon;
        if (args.given("--decay")) options.decay = decay;
        if (args.given("--seed")) options.seed = flags.seed;
        if (no_shuffle) options.shuffle = false;
        if (options.batch == 0) throw Error(ErrorCategory::kUsage, "option -b: must be positive");
        if (args.given("--steps") && max_steps == 0) {
            throw Error(ErrorCategory::kUsage, "option --steps: must be positive");
        }
        validate(opt);
        ValidationOptions vopts;
        if (validate_input.empty() != validate_target.empty()) {
            throw Error(ErrorCategory::kUsage,
                        "options --validate-input and --validate-target go together");
        }
        if (validate_input.empty() && (args.given("--validate-k") || !keep_best.empty())) {
            throw Error(ErrorCategory::kUsage,
                        std::string("option ") +
                            (keep_best.empty() ? "--validate-k" : "--keep-best") +
                            " needs --validate-input and --validate-target");
        }
        vopts.input_path = validate_input;
        vopts.target_path = validate_target;
        vopts.ks = parse_k_list(validate_k, "--validate-k");
        if (!keep_best.empty()) vopts.keep_best = parse_metric_spec(keep_best, "--keep-best");
        vopts.model_path = model_path;
        vopts.batch = options.batch;
        if (!(options.decay.value_or(0.0f) >= 0.0f)) {
            throw Error(ErrorCategory::kUsage, "option --decay: must be >= 0");
        }
        if (args.given("--checkpoint-minutes") &&
            !(checkpoint_minutes > 0.0 && checkpoint_minutes < 1e9)) {
            throw Error(ErrorCategory::kUsage,
                        "option --checkpoint-minutes: expected a number of minutes > 0");
        }
        if (args.given("--checkpoint-every") && checkpoint_every == 0) {
            throw Error(ErrorCategory::kUsage, "option --checkpoint-every: must be positive");
        }
        const bool checkpointing =
            !checkpoint_path.empty() || checkpoint_every > 0 || checkpoint_minutes > 0.0 || resume;
        if (checkpointing && checkpoint_path.empty()) checkpoint_path = model_path + ".checkpoint";
        if (resume && !std::filesystem::exists(checkpoint_path)) {
            throw Error(ErrorCategory::kUsage,
                        "option --resume: the checkpoint " + checkpoint_path + " does not exist");
        }
        set_threads(threads);
        set_verbose(verbose_flag);
        NetworkOptions net_options;
        net_options.device = device;
        net_options.share_gpus = share_gpus;
        net_options.threads = threads;
        net_options.seed = options.seed;
        net_options.comm = parse_comm_kind(comm);
        net_options.parallel = parse_parallel_mode(parallel);
        net_options.batch = options.batch;  // what --parallel auto weighs
        net_options.precision = precision_option(precision);

        std::vector<std::string> files{input_path};
        if (!output_path.empty()) files.push_back(output_path);
        files.insert(files.end(), extra.begin(), extra.end());
        // Split over an MPI job: each rank reads only its columns of the layers' datasets.
        const bool split_job = !dry_run && launched_with_mpi() && comm != "local";
        // The memory plan comes from the files' headers: nothing is loaded or allocated before
        // a run that cannot fit is refused (docs/memory.md).
        const std::map<std::string, DatasetShape> shapes = dataset_shapes(files);
        const float run_decay = options.decay.value_or(config.decay);
        // The plan's precision as Network::create resolves it (a device's default is FP32 or
        // TF32: no BF16 copies either way).
        const Precision plan_precision = net_options.precision ? *net_options.precision
                                         : config.training && config.training->precision
                                             ? *config.training->precision
                                             : Precision::kFp32;
        if (dry_run) {
            std::map<std::string, uint32_t> widths;
            for (const auto& kv : shapes) widths[kv.first] = kv.second.cols;
            int ranks = plan_ranks;
            if (ranks <= 0) ranks = launched_with_mpi() ? job_size() : 1;
            std::string plan =
                describe_model_parallel(config, widths, ranks, options.batch, opt.kind);
            const bool host = device == "cpu";
            plan += describe_memory(plan_memory(config, shapes, 1, options.batch, opt, run_decay,
                                                false, plan_precision),
                                    host);
            if (ranks > 1) {
                plan += describe_memory(plan_memory(config, shapes, ranks, options.batch, opt,
                                                    run_decay, false, plan_precision),
                                        host);
                // A data-parallel rank holds the whole network and datasets, and writes every
                // dense gradient (summed over the ranks, never fused into the step).
                plan +=
                    "--parallel data, each of the " + std::to_string(ranks) + " ranks:\n" +
                    describe_memory(plan_memory(config, shapes, 1, options.batch, opt, run_decay,
                                                /*data_parallel=*/true, plan_precision),
                                    host);
            }
            if (job_rank() == 0) std::fputs(plan.c_str(), stdout);
            return 0;
        }
        {
            std::string free_what;
            bool host = false;
            const uint64_t free_bytes =
                free_memory_for(device, threads, &free_what, &host, share_gpus);
            // A data-parallel rank holds the whole network; a model-parallel one its share.
            const int ranks = split_job && parallel != "data" ? job_size() : 1;
            const MemoryPlan plan =
                plan_memory(config, shapes, ranks, options.batch, opt, run_decay,
                            split_job && parallel == "data", plan_precision);
            check_memory_plan(config, shapes, plan, opt, run_decay, host, free_bytes, free_what);
        }
        auto datasets = split_job ? load_datasets(files, &config, job_size(), job_rank())
                                  : load_datasets(files);
        std::map<std::string, uint32_t> widths;
        for (const auto& kv : datasets) widths[kv.first] = kv.second.cols;
        check_writable(model_path);
        if (checkpointing) check_writable(checkpoint_path);
        if (job_rank() == 0) {  // rank 0 writes both files
            remove_stale_temporaries(model_path, quiet);
            if (checkpointing) remove_stale_temporaries(checkpoint_path, quiet);
        }

        // Resuming: the network (config and weights) is the checkpoint's; the config file must
        // describe the same network (Trainer::resume compares them).
        Network network = resume ? Network::load(checkpoint_path, net_options)
                                 : Network::create(config, widths, net_options);
        if (!quiet) report_rank_device(network.device());  // before rank != 0 turns quiet on
        // Data parallelism (asked for, or what auto chose): a rank's share of a shuffled batch
        // can be any rows, each with all its columns, so every rank needs the whole datasets,
        // not the column bands a split network reads.
        if (split_job && network.parallel() == "data") datasets = load_datasets(files);
        // The features indexes the datasets were converted with go into the model file, so that
        // the model resolves item names with no other file (Recommender, predict).
        for (const LayerConfig& l : network.config().layers) {
            if (l.kind == LayerKind::kHidden) continue;
            const auto it = datasets.find(l.dataset);
            if (it == datasets.end() || it->second.feature_names.empty()) continue;
            if (it->second.feature_names.size() <= network.layer_size(l.name)) {
                network.set_feature_names(l.name, it->second.feature_names);
            }
        }
        // On stderr even with -q, as the device choice: every bf16 run names what it measured.
        if (network.rank() == 0) report_bf16_kernel("train", network.device(), network.precision());
        if (network.rank() != 0) {  // a split network: rank 0 reports and writes the files
            quiet = true;
            metrics_path.clear();
        }
        std::unique_ptr<Validation> validation;
        if (!vopts.input_path.empty()) validation = std::make_unique<Validation>(network, vopts);
        Progress progress(options.epochs, quiet, metrics_path, /*append=*/resume);
        // --steps: the trainer is asked to stop after the batch that makes N; every rank counts
        // the same batches, and the ranks agree on stopping (Trainer::cancel).
        uint32_t steps_taken = 0;
        bool steps_reached = false;
        Trainer* running = nullptr;
        options.on_batch = [&](const BatchProgress& p) {
            progress.on_batch(p);
            if (max_steps > 0 && ++steps_taken >= max_steps && !steps_reached && running) {
                steps_reached = true;
                running->cancel();
            }
        };
        options.on_epoch = [&](const EpochStats& s) {
            std::string note, json_fields;
            if (validation) validation->on_epoch(s, &note, &json_fields);
            progress.on_epoch(s, note, json_fields);
        };
        if (!quiet) {
            const std::string ranks = network.ranks() > 1
                                          ? " x " + std::to_string(network.ranks()) + " ranks (" +
                                                network.parallel() + " parallel)"
                                          : "";
            std::printf("training '%s' on %s%s: %zu layers, batch %u, %u epochs, %s (alpha %g)\n",
                        network.config().name.c_str(), network.device().c_str(), ranks.c_str(),
                        network.config().layers.size(), options.batch, options.epochs,
                        to_string(opt.kind), double(opt.learning_rate));
        }
        if (checkpointing) {
            options.checkpoint = checkpoint_path;
            options.checkpoint_every = checkpoint_every;
            options.checkpoint_seconds = checkpoint_minutes * 60.0;
            options.checkpoint_notes = [&]() {
                std::map<std::string, std::string> notes;
                if (validation && validation->best_epoch() > 0) {
                    char value[40];
                    std::snprintf(value, sizeof value, "%.17g", validation->best_value());
                    notes[kBestEpoch] = std::to_string(validation->best_epoch());
                    notes[kBestValue] = value;
                }
                return notes;
            };
            options.on_checkpoint = [&](const CheckpointInfo& c) {
                if (quiet) return;
                std::printf("checkpoint written to %s (%u epochs%s, %.2f s)\n", c.path.c_str(),
                            c.epochs_complete,
                            c.batches_done > 0
                                ? (" and " + std::to_string(c.batches_done) + " batches").c_str()
                                : "",
                            c.seconds);
                std::fflush(stdout);
            };
        }
        Trainer trainer(network, pointers(datasets), options);
        running = &trainer;
        if (resume) {
            const auto notes = trainer.resume(checkpoint_path);
            if (validation && notes.count(kBestEpoch) && notes.count(kBestValue)) {
                validation->restore_best(uint32_t(std::stoul(notes.at(kBestEpoch))),
                                         std::stod(notes.at(kBestValue)));
            }
            if (!quiet) {
                const uint32_t whole = trainer.epochs_complete();
                std::printf("resumed from %s: %u epochs done%s\n", checkpoint_path.c_str(), whole,
                            trainer.epochs_done() > whole
                                ? (", epoch " + std::to_string(whole + 1) + " in progress").c_str()
                                : "");
            }
        }
        if (checkpointing) {
            g_trainer.store(&trainer);
            std::signal(SIGINT, stop_training);
            std::signal(SIGTERM, stop_training);
        }
        struct Restore {  // the handlers must not outlive the trainer
            ~Restore() {
                g_trainer.store(nullptr);
                std::signal(SIGINT, SIG_DFL);
                std::signal(SIGTERM, SIG_DFL);
            }
        } restore;
        const bool owed = trainer.epochs_complete() < options.epochs;
        const std::vector<EpochStats> epochs = trainer.fit();
        // Stopped by a signal (on any rank: the ranks agree on stopping, so each gets here).
        const bool stopped = owed && !steps_reached && (epochs.empty() || !epochs.back().complete);
        // The epoch that --steps ended is reported too (the trainer reports whole epochs only),
        // so that its seconds and examples give the time per step.
        if (steps_reached && !epochs.empty() && !epochs.back().complete) {
            progress.on_epoch(epochs.back(),
                              "stopped after step " + std::to_string(max_steps) + " (--steps)",
                              ", \"complete\": false");
        }
        if (checkpointing && stopped) {
            const int sig = g_signal.load() != 0 ? g_signal.load() : SIGTERM;
            trainer.save_checkpoint(checkpoint_path);
            std::fprintf(stderr,
                         "sparsenet train: stopped by signal %d; the checkpoint %s holds the "
                         "training so far: run the same command with --resume to continue\n",
                         sig, checkpoint_path.c_str());
            return 128 + sig;
        }
        if (validation && validation->best_epoch() > 0) {
            // The best epoch's model is already in model_path (saved when it was reached).
            const MetricSpec& best = *validation->options().keep_best;
            if (!quiet) {
                std::printf("kept the model of epoch %u (best validation %s@%u %.6f) in %s\n",
                            validation->best_epoch(), best.name.c_str(), best.k,
                            validation->best_value(), model_path.c_str());
            }
        } else {
            network.save(model_path);
            if (!quiet) std::printf("model written to %s\n", model_path.c_str());
        }
        return 0;
    });
}

}  // namespace sparsenet::cli
