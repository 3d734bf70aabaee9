// sparsenet train: JSON network + netCDF datasets -> trained model file.
#include <cstdio>

#include "args.h"
#include "common.h"
#include "progress.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"

namespace sparsenet::cli {

int train_main(int argc, char** argv) {
    return run_command("train", [&]() {
        std::string config_path, input_path, output_path, model_path, device = "auto", metrics_path;
        std::string optimizer = "sgd";
        std::vector<std::string> extra;
        TrainOptions options;
        options.batch = 1024;
        options.epochs = 40;
        NetworkOptions net_options;
        int threads = 0;
        bool quiet = false, no_shuffle = false;
        ArgParser args("train",
                       "Trains a network defined in DSSTNE's JSON language on sparse "
                       "netCDF datasets and writes the model file.");
        args.add({"-c", "--config"}, &config_path, "FILE.json", "network definition", true);
        args.add({"-i", "--input"}, &input_path, "FILE.nc", "input dataset file", true);
        args.add({"-o", "--output"}, &output_path, "FILE.nc",
                 "output (target) dataset file; may be the input file");
        args.add_list({"--data"}, &extra, "FILE.nc", "another dataset file (repeatable)");
        args.add({"-n", "--model"}, &model_path, "FILE.nc", "model file to write", true);
        args.add({"-b", "--batch"}, &options.batch, "N", "minibatch size (default 1024)");
        args.add({"-e", "--epochs"}, &options.epochs, "N", "epochs (default 40)");
        args.add({"--learning-rate", "-alpha"}, &options.optimizer.learning_rate, "F",
                 "learning rate (default 0.025)");
        args.add({"--optimizer"}, &optimizer, "NAME", "sgd | momentum | adam (default sgd)");
        args.add({"--momentum", "-mu"}, &options.optimizer.momentum, "F",
                 "momentum for the momentum optimizer (default 0.9)");
        args.add({"--l2", "-lambda"}, &options.optimizer.l2, "F", "L2 weight decay (default 0)");
        args.add({"--beta1"}, &options.optimizer.beta1, "F", "Adam beta1 (default 0.9)");
        args.add({"--beta2"}, &options.optimizer.beta2, "F", "Adam beta2 (default 0.999)");
        args.add({"--seed"}, &options.seed, "N",
                 "seed of weights, shuffling and dropout (default 12134)");
        args.add_flag({"--no-shuffle"}, &no_shuffle,
                      "keep the example order (overrides "
                      "ShuffleIndices)");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add({"--device"}, &device, "DEV", "auto | cpu | cuda[:N] (default auto)");
        args.add({"--metrics-out"}, &metrics_path, "FILE", "per-epoch metrics as JSON lines");
        args.add_flag({"-q", "--quiet"}, &quiet, "print nothing but errors");
        if (!args.parse(argc, argv)) return 0;

        options.optimizer.kind = optimizer_from_string(optimizer);
        if (options.batch == 0) throw Error(ErrorCategory::kUsage, "option -b: must be positive");
        if (no_shuffle) options.shuffle = false;
        set_threads(threads);
        net_options.device = device;
        net_options.threads = threads;
        net_options.seed = options.seed;

        const NetworkConfig config = NetworkConfig::from_file(config_path);
        std::vector<std::string> files{input_path};
        if (!output_path.empty()) files.push_back(output_path);
        files.insert(files.end(), extra.begin(), extra.end());
        const auto datasets = load_datasets(files);
        std::map<std::string, uint32_t> widths;
        for (const auto& kv : datasets) widths[kv.first] = kv.second.cols;
        check_writable(model_path);

        Network network = Network::create(config, widths, net_options);
        Progress progress(options.epochs, quiet, metrics_path);
        options.on_batch = [&](const BatchProgress& p) { progress.on_batch(p); };
        options.on_epoch = [&](const EpochStats& s) { progress.on_epoch(s); };
        if (!quiet) {
            std::printf("training '%s' on %s: %zu layers, batch %u, %u epochs, %s\n",
                        network.config().name.c_str(), network.device().c_str(),
                        network.config().layers.size(), options.batch, options.epochs,
                        to_string(options.optimizer.kind));
        }
        Trainer trainer(network, pointers(datasets), options);
        trainer.fit();
        network.save(model_path);
        if (!quiet) std::printf("model written to %s\n", model_path.c_str());
        return 0;
    });
}

}  // namespace sparsenet::cli
