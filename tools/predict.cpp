// sparsenet predict: model + input dataset -> top-K recommendations in DSSTNE's recs format.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "args.h"
#include "common.h"
#include "common/resources.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"

namespace sparsenet::cli {
namespace {

// Row-wise union of two CSR datasets with the same examples (boolean result).
Dataset csr_union(const Dataset& a, const Dataset& b) {
    if (a.is_indexed() || b.is_indexed()) return csr_union(a.expanded(), b.expanded());
    Dataset u;
    u.name = a.name + "+" + b.name;
    u.rows = a.rows;
    u.cols = std::max(a.cols, b.cols);
    u.offsets.assign(1, 0);
    for (uint64_t r = 0; r < a.rows; ++r) {
        std::set_union(a.indices.begin() + a.offsets[r], a.indices.begin() + a.offsets[r + 1],
                       b.indices.begin() + b.offsets[r], b.indices.begin() + b.offsets[r + 1],
                       std::back_inserter(u.indices));
        u.offsets.push_back(u.indices.size());
    }
    return u;
}

std::string label(const std::vector<std::string>& names, uint64_t i) {
    return i < names.size() ? names[i] : std::to_string(i);
}

}  // namespace

int predict_main(int argc, char** argv) {
    return run_command("predict", [&]() {
        std::string model_path, input_path, out_path, exclude_path, samples_index, features_index,
            device = "auto", output_layer, comm = "auto", parallel = "model";
        PredictOptions options;
        options.k = 100;
        options.batch = 1024;
        int threads = 0;
        bool keep_input = false;
        ArgParser args("predict",
                       "Scores every row of the input dataset with a trained model and writes "
                       "the top-K items per row as 'name<TAB>item,score:item,score:...'. The "
                       "row's own input items are excluded unless --keep-input is given.");
        args.add({"-n", "--model"}, &model_path, "FILE.nc", "model file written by train", true);
        args.add({"--input"}, &input_path, "FILE.nc",
                 "dataset file holding the Input layer's dataset", true);
        args.add({"-k"}, &options.k, "K", "recommendations per row (default 100)");
        args.add({"-b", "--batch"}, &options.batch, "N", "rows per batch (default 1024)");
        args.add({"-s", "--output"}, &out_path, "FILE", "recommendations file (default stdout)");
        args.add_flag({"--keep-input"}, &keep_input, "do not exclude the row's own input items");
        args.add({"--exclude"}, &exclude_path, "FILE.nc",
                 "also exclude the items of this dataset's rows (first dataset of the file)");
        args.add({"--samples-index"}, &samples_index, "FILE",
                 "sample names ('label<TAB>index'); default: row numbers");
        args.add({"-o", "--features-index"}, &features_index, "FILE",
                 "output feature names ('label<TAB>index'); default: column numbers");
        args.add({"--output-layer"}, &output_layer, "NAME",
                 "layer to rank (default: the first Output layer)");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add({"--device"}, &device, "DEV", "auto | cpu | cuda[:N] (default auto)");
        args.add({"--comm"}, &comm, "KIND",
                 "auto | local | mpi | nccl: the ranks that split the model under mpirun "
                 "(default auto)");
        args.add({"--parallel"}, &parallel, "MODE",
                 "model | data: split the model's layers across the ranks, or let every rank "
                 "hold all of it (default model)");
        if (!args.parse(argc, argv)) return 0;
        if (options.k == 0) throw Error(ErrorCategory::kUsage, "option -k: must be positive");
        if (options.batch == 0) throw Error(ErrorCategory::kUsage, "option -b: must be positive");
        options.output_layer = output_layer;
        set_threads(threads);

        NetworkOptions net_options;
        net_options.device = device;
        net_options.threads = threads;
        net_options.comm = comm;
        net_options.parallel = parallel;
        Network network = Network::load(model_path, net_options);
        auto datasets = load_datasets({input_path});
        std::vector<const LayerConfig*> inputs;
        for (const LayerConfig& l : network.config().layers) {
            if (l.kind == LayerKind::kInput) inputs.push_back(&l);
        }
        // A file with a single dataset feeds a single-input network whatever its name.
        if (inputs.size() == 1 && datasets.size() == 1 && !datasets.count(inputs[0]->dataset)) {
            Dataset only = std::move(datasets.begin()->second);
            datasets.clear();
            only.name = inputs[0]->dataset;
            datasets.emplace(only.name, std::move(only));
        }
        for (const LayerConfig* l : inputs) {
            if (!datasets.count(l->dataset)) {
                throw Error(ErrorCategory::kData, input_path + ": has no dataset '" + l->dataset +
                                                      "' for input layer '" + l->name + "'");
            }
        }
        std::vector<std::string> sample_names, feature_names;
        if (!samples_index.empty()) sample_names = read_index(samples_index);
        if (!features_index.empty()) feature_names = read_index(features_index);

        Predictor predictor(network, pointers(datasets));
        const std::string out_layer_name = [&] {
            if (!output_layer.empty()) return output_layer;
            for (const LayerConfig& l : network.config().layers) {
                if (l.kind == LayerKind::kOutput) return l.name;
            }
            return std::string();
        }();
        const uint32_t out_width = network.layer_size(out_layer_name);
        if (!sample_names.empty() && sample_names.size() < predictor.rows()) {
            throw Error(ErrorCategory::kData, samples_index + ": names " +
                                                  std::to_string(sample_names.size()) +
                                                  " samples; the input has " +
                                                  std::to_string(predictor.rows()) + " rows");
        }
        if (!feature_names.empty() && feature_names.size() < out_width) {
            throw Error(ErrorCategory::kData, features_index + ": names " +
                                                  std::to_string(feature_names.size()) +
                                                  " features; layer '" + out_layer_name + "' has " +
                                                  std::to_string(out_width));
        }

        // What to exclude: the row's own inputs (default) and/or an explicit filter dataset.
        const Dataset* exclude = nullptr;
        Dataset merged;
        if (!keep_input) {
            if (inputs.size() != 1) {
                throw Error(ErrorCategory::kUsage,
                            "excluding the input items needs a single-input network; use "
                            "--keep-input with --exclude FILE.nc");
            }
            const Dataset& in = datasets.at(inputs[0]->dataset);
            if (in.cols > out_width) {
                throw Error(ErrorCategory::kUsage,
                            "the input dataset is wider than the output layer, so its items are "
                            "not output items; use --keep-input (and --exclude FILE.nc)");
            }
            exclude = &in;
        }
        Dataset filter;
        if (!exclude_path.empty()) {
            filter = Dataset::read(exclude_path);
            if (exclude != nullptr) {
                if (filter.examples() != exclude->examples()) {
                    throw Error(ErrorCategory::kData,
                                exclude_path + ": has " + std::to_string(filter.examples()) +
                                    " rows; the input has " + std::to_string(exclude->examples()));
                }
                merged = csr_union(*exclude, filter);
                exclude = &merged;
            } else {
                exclude = &filter;
            }
        }

        const TopK top = predictor.top_k(options, exclude);
        if (network.rank() != 0) return 0;  // a split model: every rank merged; rank 0 writes
        // -s FILE: atomic replacement, as write_model: a temporary file flushed to the device and
        // renamed over FILE; a failed write (a full disk, the file size limit) leaves a previous
        // FILE as it was and no temporary file.
        FILE* out = stdout;
        const std::string tmp = out_path + ".tmp." + std::to_string(getpid());
        auto fail = [&](const std::string& what) {
            const std::string reason = std::strerror(errno);
            const std::string hint = io::storage_hint(out_path);
            if (out != nullptr) std::fclose(out);
            std::remove(tmp.c_str());
            throw Error(ErrorCategory::kIo, out_path +
                                                ": not written (a previous file of that name is "
                                                "left as it was): " +
                                                what + ": " + reason + hint);
        };
        if (!out_path.empty()) {
            out = std::fopen(tmp.c_str(), "w");
            if (out == nullptr) {
                throw Error(ErrorCategory::kIo,
                            out_path + ": cannot write " + tmp + ": " + std::strerror(errno));
            }
        }
        for (uint64_t r = 0; r < top.rows; ++r) {
            std::string line = label(sample_names, r);
            line += '\t';
            bool first = true;
            for (uint32_t i = 0; i < top.k; ++i) {
                const uint32_t item = top.indices[r * top.k + i];
                if (item == std::numeric_limits<uint32_t>::max()) break;
                char score[32];
                std::snprintf(score, sizeof score, "%.6g", top.scores[r * top.k + i]);
                if (!first) line += ':';
                line += label(feature_names, item) + "," + score;
                first = false;
            }
            line += '\n';
            if (std::fputs(line.c_str(), out) == EOF && !out_path.empty()) fail("writing " + tmp);
        }
        if (!out_path.empty()) {
            if (std::fflush(out) != 0 || std::ferror(out) != 0) fail("writing " + tmp);
            if (::fsync(fileno(out)) != 0) fail("flushing " + tmp + " to disk (fsync)");
            const int closed = std::fclose(out);
            out = nullptr;
            if (closed != 0) fail("closing " + tmp);
            if (std::rename(tmp.c_str(), out_path.c_str()) != 0) fail("renaming " + tmp + " to it");
            if (!io::sync_parent_directory(out_path)) {
                throw Error(ErrorCategory::kIo, out_path +
                                                    ": written, but its directory could not be "
                                                    "flushed to disk (fsync): " +
                                                    std::strerror(errno));
            }
        }
        return 0;
    });
}

}  // namespace sparsenet::cli
