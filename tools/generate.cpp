// sparsenet generate: a seeded synthetic dataset with planted user/item structure.
#include <chrono>
#include <cstdio>
#include <sstream>

#include "args.h"
#include "common.h"
#include "sparsenet/convert.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet::cli {

int generate_main(int argc, char** argv) {
    return run_command("generate", [&]() {
        GenerateOptions g;
        std::string text_path, text_format = "csv";
        std::string out_path, heldout_path, names = "gl_input,gl_output", heldout_name = "heldout";
        int threads = 0;
        bool quiet = false;
        ArgParser args("generate",
                       "Writes a synthetic interaction dataset (users x items) with planted "
                       "latent topics and power-law item popularity, for demos, tests and "
                       "benchmarks. Same seed, same file. ML-20M shape: --users 138493 --items "
                       "27278 --nnz 20000263.");
        args.add({"-o", "--output"}, &out_path, "FILE.nc", "netCDF file to write", true);
        args.add({"--users"}, &g.users, "N", "rows (default 2000)");
        args.add({"--items"}, &g.items, "N", "columns (default 1000)");
        args.add({"--nnz"}, &g.nnz, "N", "target number of interactions (default 60000)");
        args.add({"--factors"}, &g.factors, "N", "planted topics (default 16)");
        args.add({"--popularity-exponent"}, &g.popularity_exponent, "F",
                 "Zipf exponent of item popularity (default 1.0)");
        args.add({"--topic-focus"}, &g.topic_focus, "F",
                 "probability an interaction follows the user's topics (default 0.8)");
        args.add({"--min-row"}, &g.min_row, "N", "minimum items per user (default 2)");
        args.add({"--seed"}, &g.seed, "N", "random seed (default 1)");
        args.add({"--names"}, &names, "A,B",
                 "dataset names to write the data under (default gl_input,gl_output)");
        args.add({"--holdout"}, &g.holdout, "F",
                 "fraction of each user's items held out (default 0: none)");
        args.add({"--heldout-output"}, &heldout_path, "FILE.nc",
                 "where the held-out items go (needed with --holdout)");
        args.add({"--heldout-name"}, &heldout_name, "NAME",
                 "dataset name of the held-out items (default heldout)");
        args.add({"--text"}, &text_path, "FILE",
                 "also write the training interactions as text (for sparsenet convert)");
        args.add({"--text-format"}, &text_format, "FMT",
                 "csv (MovieLens ratings.csv, default), dsstne, tsv, dat or user-items");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add_flag({"-q", "--quiet"}, &quiet, "print nothing but errors");
        if (!args.parse(argc, argv)) return 0;
        if (g.holdout < 0.0 || g.holdout >= 1.0) {
            throw Error(ErrorCategory::kUsage, "option --holdout: expected 0 <= F < 1");
        }
        if (g.holdout > 0.0 && heldout_path.empty()) {
            throw Error(ErrorCategory::kUsage, "--holdout needs --heldout-output FILE.nc");
        }
        if (g.users == 0 || g.items == 0) {
            throw Error(ErrorCategory::kUsage, "--users and --items must be positive");
        }
        const TextFormat format = parse_text_format(text_format);
        if (format == TextFormat::kAuto) {
            throw Error(ErrorCategory::kUsage, "option --text-format: name a format");
        }
        set_threads(threads);
        const std::vector<std::string> name_list = split_list(names, "--names");

        const auto start = std::chrono::steady_clock::now();
        GeneratedData data = generate(g);
        std::vector<Dataset> out;
        for (size_t i = 0; i < name_list.size(); ++i) {
            // The last name takes the data itself: one copy fewer (400 MB at 100M interactions).
            if (i + 1 < name_list.size()) {
                out.push_back(data.train);
            } else {
                out.push_back(std::move(data.train));
            }
            out.back().name = name_list[i];
        }
        write_datasets(out_path, out);
        if (g.holdout > 0.0) {
            data.heldout.name = heldout_name;
            write_datasets(heldout_path, {data.heldout});
        }
        const Dataset& train = out.back();
        if (!text_path.empty()) write_text(text_path, train, format);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!quiet) {
            std::printf("wrote %s: %llu users x %u items, %llu interactions (%s)", out_path.c_str(),
                        (unsigned long long)train.rows, train.cols, (unsigned long long)train.nnz(),
                        names.c_str());
            if (g.holdout > 0.0) {
                std::printf("; %s: %llu held out", heldout_path.c_str(),
                            (unsigned long long)data.heldout.nnz());
            }
            if (!text_path.empty()) {
                std::printf("; text (%s): %s", to_string(format), text_path.c_str());
            }
            std::printf("; %.2fs\n", seconds);
        }
        return 0;
    });
}

}  // namespace sparsenet::cli
