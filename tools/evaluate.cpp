// sparsenet evaluate: ranking metrics of a model's top-K (train items excluded) on held-out
// items, beside the popularity baseline.
#include <cstdio>

#include "args.h"
#include "common.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"

namespace sparsenet::cli {
namespace {

void print_row(const char* who, const RankingMetrics& m) {
    std::printf("%-12s Recall@%u %.4f   Precision@%u %.4f   NDCG@%u %.4f   (%llu users)\n", who,
                m.k, m.recall, m.k, m.precision, m.k, m.ndcg, (unsigned long long)m.users);
}

}  // namespace

int evaluate_main(int argc, char** argv) {
    return run_command("evaluate", [&]() {
        std::string model_path, input_path, heldout_path, output_layer, device = "auto";
        uint32_t k = 20, batch = 1024;
        int threads = 0;
        bool baseline = false;
        ArgParser args("evaluate",
                       "Ranks all items for every row of the input (its own items excluded) "
                       "and scores the top-K against the held-out items of the same rows.");
        args.add({"-n", "--model"}, &model_path, "FILE.nc", "model file written by train", true);
        args.add({"--input"}, &input_path, "FILE.nc", "the rows' known (training) items", true);
        args.add({"--heldout"}, &heldout_path, "FILE.nc", "the rows' held-out items", true);
        args.add({"-k"}, &k, "K", "cut-off (default 20)");
        args.add({"-b", "--batch"}, &batch, "N", "rows per batch (default 1024)");
        args.add_flag({"--popularity"}, &baseline, "also score the popularity baseline");
        args.add({"--output-layer"}, &output_layer, "NAME",
                 "layer to rank (default: the first Output layer)");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add({"--device"}, &device, "DEV", "auto | cpu | cuda[:N] (default auto)");
        if (!args.parse(argc, argv)) return 0;
        if (k == 0) throw Error(ErrorCategory::kUsage, "option -k: must be positive");
        set_threads(threads);
        NetworkOptions net_options;
        net_options.device = device;
        net_options.threads = threads;
        Network network = Network::load(model_path, net_options);
        const LayerConfig* input_layer = nullptr;
        for (const LayerConfig& l : network.config().layers) {
            if (l.kind == LayerKind::kInput) {
                if (input_layer != nullptr) {
                    throw Error(ErrorCategory::kUsage, "evaluate needs a single-input network");
                }
                input_layer = &l;
            }
        }
        Dataset input = Dataset::read(input_path);
        input.name = input_layer->dataset;
        const Dataset heldout = Dataset::read(heldout_path);
        Predictor predictor(network, {{input.name, &input}});
        PredictOptions options;
        options.k = k;
        options.batch = batch;
        options.output_layer = output_layer;
        const TopK top = predictor.top_k(options, &input);
        print_row("model", ranking_metrics(top, heldout, k));
        if (baseline)
            print_row("popularity", ranking_metrics(popularity_top_k(input, k), heldout, k));
        return 0;
    });
}

}  // namespace sparsenet::cli
