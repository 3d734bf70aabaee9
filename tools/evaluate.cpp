// sparsenet evaluate: ranking metrics at several K on held-out items, of a model's top-K (train
// items excluded) or of a recommendations file written by anything, beside the popularity
// baseline.
#include <algorithm>
#include <cstdio>

#include "args.h"
#include "common.h"
#include "ranking_report.h"
#include "recs_file.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/metrics.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"

namespace sparsenet::cli {
namespace {

// The per-user file: a header, then one line per evaluated user.
std::string per_user_text(const RankingReport& report, const std::vector<std::string>& names) {
    std::string out = "user\theldout";
    for (const MetricsAtK& m : report.at) {
        const std::string at = "@" + std::to_string(m.k);
        for (const char* name : {"hits", "recall", "nrecall", "precision", "ndcg", "ap"}) {
            out += std::string("\t") + name + at;
        }
    }
    out += '\n';
    for (const UserMetrics& u : report.per_user) {
        out += u.row < names.size() ? names[u.row] : std::to_string(u.row);
        out += '\t' + std::to_string(u.heldout);
        for (const UserMetricsAtK& m : u.at) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "\t%u\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g", m.hits, m.recall,
                          m.nrecall, m.precision, m.ndcg, m.ap);
            out += buf;
        }
        out += '\n';
    }
    return out;
}

Dataset read_plain(const std::string& path) {
    Dataset d = Dataset::read(path);
    return d.is_indexed() ? d.expanded() : d;
}

}  // namespace

int evaluate_main(int argc, char** argv) {
    return run_command("evaluate", [&]() {
        std::string model_path, input_path, heldout_path, recs_path, output_layer,
            device = "auto", k_text = "20", json_path, per_user_path, samples_index, features_index,
            precision;
        uint32_t batch = 1024;
        int threads = 0;
        bool baseline = false;
        ArgParser args(
            "evaluate",
            "Scores top-K lists against held-out items: Recall, normalised Recall, Precision, "
            "NDCG, MAP, hit rate and catalogue coverage at each K. The lists come from a model "
            "(-n, every item ranked, the row's --input items excluded) or from a recommendations "
            "file (--recs, 'user<TAB>item,score:...' as predict -s writes).");
        args.add({"-n", "--model"}, &model_path, "FILE.nc", "model file written by train");
        args.add({"--recs"}, &recs_path, "FILE",
                 "recommendations file to score instead of a model");
        args.add({"--input"}, &input_path, "FILE.nc",
                 "the rows' known (training) items: excluded from the ranking (required with "
                 "-n; with --recs, dropped from the lists)");
        args.add({"--heldout"}, &heldout_path, "FILE.nc", "the rows' held-out items", true);
        args.add({"-k"}, &k_text, "K[,K...]", "cut-offs (default 20)");
        args.add({"--samples-index"}, &samples_index, "FILE",
                 "user names ('label<TAB>index', the held-out rows' order); default: row numbers");
        args.add({"--features-index"}, &features_index, "FILE",
                 "with --recs: item names ('label<TAB>index'); default: column numbers");
        args.add({"--json", "--metrics-out"}, &json_path, "FILE", "write the metrics as JSON");
        args.add({"--per-user"}, &per_user_path, "FILE",
                 "write one line per evaluated user: name, |held-out|, hits and metrics per K");
        args.add({"-b", "--batch"}, &batch, "N", "rows per batch (default 1024)");
        args.add_flag({"--popularity"}, &baseline,
                      "also score the popularity baseline (needs --input)");
        args.add({"--output-layer"}, &output_layer, "NAME",
                 "layer to rank (default: the first Output layer)");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add({"--device"}, &device, "DEV", "auto | cpu | cuda[:N] (default auto)");
        args.add({"--precision"}, &precision, "P", kPrecisionHelp);
        bool verbose_flag = false;
        args.add_flag({"-v", "--verbose"}, &verbose_flag,
                      "also say which device --device auto took when it is the CPU of a machine "
                      "without an NVIDIA GPU");
        if (!args.parse(argc, argv)) return 0;
        (void)precision_option(precision);  // a bad value fails before any file is read
        const std::vector<uint32_t> ks = parse_k_list(k_text, "-k");
        const uint32_t kmax = *std::max_element(ks.begin(), ks.end());
        const bool recs_mode = !recs_path.empty();
        if (recs_mode == !model_path.empty()) {
            throw Error(ErrorCategory::kUsage,
                        "give either -n model.nc (with --input) or --recs FILE, not both");
        }
        if (!recs_mode && input_path.empty()) {
            throw Error(ErrorCategory::kUsage, "option --input is required with -n");
        }
        if (!recs_mode && !features_index.empty()) {
            throw Error(ErrorCategory::kUsage,
                        "option --features-index goes with --recs (a model's items are its "
                        "output columns)");
        }
        if (baseline && input_path.empty()) {
            throw Error(ErrorCategory::kUsage, "option --popularity needs --input");
        }
        if (batch == 0) throw Error(ErrorCategory::kUsage, "option -b: must be positive");
        set_threads(threads);
        set_verbose(verbose_flag);

        const Dataset heldout = read_plain(heldout_path);
        Dataset input;
        if (!input_path.empty()) input = read_plain(input_path);
        std::vector<std::string> sample_names, feature_names;
        if (!samples_index.empty()) sample_names = read_index(samples_index);
        if (!features_index.empty()) feature_names = read_index(features_index);
        if (!sample_names.empty() && sample_names.size() < heldout.rows) {
            throw Error(ErrorCategory::kData, samples_index + ": names " +
                                                  std::to_string(sample_names.size()) +
                                                  " samples; the held-out file " + heldout_path +
                                                  " has " + std::to_string(heldout.rows) + " rows");
        }

        TopK top;
        std::string label;
        Json::Value recs_info(Json::nullValue);
        uint32_t items = 0;
        if (recs_mode) {
            label = "recs";
            items = feature_names.empty() ? heldout.cols : uint32_t(feature_names.size());
            if (heldout.cols > items) {
                throw Error(ErrorCategory::kData,
                            heldout_path + ": has " + std::to_string(heldout.cols) + " columns; " +
                                features_index + " names " + std::to_string(items) + " features");
            }
            if (!input_path.empty() && input.cols > items) {
                throw Error(ErrorCategory::kData,
                            input_path + ": has " + std::to_string(input.cols) +
                                " columns; the catalogue has " + std::to_string(items) + " items");
            }
            RecsReadOptions ro;
            ro.sample_names = &sample_names;
            ro.feature_names = &feature_names;
            ro.rows = heldout.rows;
            ro.items = items;
            ro.k = kmax;
            ro.drop = input_path.empty() ? nullptr : &input;
            RecsFile recs = read_recs(recs_path, ro);
            if (recs.longest < kmax) {
                throw Error(ErrorCategory::kData, recs_path + ": the longest list has " +
                                                      std::to_string(recs.longest) +
                                                      " items; K = " + std::to_string(kmax) +
                                                      " needs lists of at least K items");
            }
            uint64_t absent = 0;
            for (uint64_t r = 0; r < heldout.rows; ++r) {
                if (heldout.offsets[r + 1] > heldout.offsets[r] && !recs.listed[r]) absent++;
            }
            std::printf("%s: %llu users listed", recs_path.c_str(), (unsigned long long)recs.lines);
            if (recs.outside_rows > 0) {
                std::printf(", %llu of them beyond the held-out rows (ignored)",
                            (unsigned long long)recs.outside_rows);
            }
            std::printf("; %llu held-out users absent from the file count as zero hits\n",
                        (unsigned long long)absent);
            if (!input_path.empty()) {
                std::printf(
                    "dropped %llu train items (%s) from the lists; %llu lists are left "
                    "with fewer than %u items\n",
                    (unsigned long long)recs.dropped, input_path.c_str(),
                    (unsigned long long)recs.short_lists, kmax);
            }
            recs_info["file"] = recs_path;
            recs_info["users_listed"] = Json::UInt64(recs.lines);
            recs_info["users_beyond_heldout_rows"] = Json::UInt64(recs.outside_rows);
            recs_info["heldout_users_absent"] = Json::UInt64(absent);
            recs_info["dropped_train_items"] = Json::UInt64(recs.dropped);
            recs_info["short_lists"] = Json::UInt64(recs.short_lists);
            top = std::move(recs.top);
        } else {
            label = "model";
            NetworkOptions net_options;
            net_options.device = device;
            net_options.threads = threads;
            net_options.precision = precision_option(precision);
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
            input.name = input_layer->dataset;
            Predictor predictor(network, {{input.name, &input}});
            PredictOptions options;
            options.k = kmax;
            options.batch = batch;
            options.output_layer = output_layer;
            top = predictor.top_k(options, &input);
            std::string out_layer = output_layer;
            for (const LayerConfig& l : network.config().layers) {
                if (out_layer.empty() && l.kind == LayerKind::kOutput) out_layer = l.name;
            }
            items = network.layer_size(out_layer);
        }

        RankingOptions ro;
        ro.ks = ks;
        ro.items = items;
        ro.per_user = !per_user_path.empty();
        const RankingReport report = evaluate_ranking(top, heldout, ro);
        RankingReport popular;
        std::vector<std::pair<std::string, const RankingReport*>> rows{{label, &report}};
        if (baseline) {
            if (input.examples() != heldout.rows) {
                throw Error(ErrorCategory::kData,
                            input_path + ": has " + std::to_string(input.examples()) +
                                " rows; the held-out file " + heldout_path + " has " +
                                std::to_string(heldout.rows) +
                                "; the popularity baseline needs the same rows");
            }
            RankingOptions po = ro;
            po.per_user = false;
            popular = evaluate_ranking(popularity_top_k(input, kmax), heldout, po);
            rows.push_back({"popularity", &popular});
        }
        std::printf("%llu users with held-out items (of %llu rows), %u items\n",
                    (unsigned long long)report.users, (unsigned long long)report.rows, items);
        std::fputs(metrics_table(rows).c_str(), stdout);
        if (!json_path.empty()) {
            Json::Value all(Json::objectValue);
            all["mode"] = recs_mode ? "recs" : "model";
            all["ks"] = Json::Value(Json::arrayValue);
            for (uint32_t k : ks) all["ks"].append(Json::UInt(k));
            for (const auto& row : rows) all[row.first] = metrics_json(*row.second);
            if (!recs_info.isNull()) all["recs_file"] = recs_info;
            write_text_file(json_path, json_text(all, false) + "\n");
        }
        if (!per_user_path.empty()) {
            write_text_file(per_user_path, per_user_text(report, sample_names));
        }
        return 0;
    });
}

}  // namespace sparsenet::cli
