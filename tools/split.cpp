// sparsenet split: train / validation / test datasets by one of three evaluation protocols.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "args.h"
#include "common.h"
#include "sparsenet/convert.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/split.h"

namespace sparsenet::cli {
namespace {

const char* kUsage =
    "usage: sparsenet split <protocol> [options]\n"
    "\n"
    "protocols:\n"
    "  fixed    published split files as given (LightGCN Gowalla/Yelp2018, ML-1M): --train,\n"
    "           --test [, --validation], optionally carving a seeded validation set from train\n"
    "  strong   strong generalization (Liang et al. 2018, vae_cf): held-out users with an\n"
    "           80/20 fold-in / held-out split of their items, seeded as the reference code\n"
    "  random   random 80/20 of all interactions, seeded (DSSTNE's protocol)\n"
    "\n"
    "'sparsenet split <protocol> --help' lists its options.\n";

struct Common {
    std::string out_dir;
    std::string names = "gl_input,gl_output";
    std::string format = "auto";
    std::string ids = "default";
    int threads = 0;
    bool quiet = false;

    void add_to(ArgParser& args) {
        args.add({"-o", "--output-dir"}, &out_dir, "DIR", "directory for the files (created)",
                 true);
        args.add({"--names"}, &names, "IN,OUT",
                 "dataset names of the training file (default gl_input,gl_output); fold-in "
                 "files use the first, held-out files are named 'heldout'");
        args.add({"--format"}, &format, "FMT", "input format (default auto; see convert)");
        args.add({"--ids"}, &ids, "MODE", "numeric or first-seen (default: as convert)");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add_flag({"-q", "--quiet"}, &quiet, "print nothing but errors");
    }

    ConvertOptions convert_options() const {
        ConvertOptions o;
        o.format = parse_text_format(format);
        o.ids = parse_id_mode(ids);
        return o;
    }

    std::vector<std::string> name_list() const { return split_list(names, "--names"); }

    std::string path(const std::string& file) const {
        return (std::filesystem::path(out_dir) / file).string();
    }

    void prepare() const {
        std::error_code ec;
        std::filesystem::create_directories(out_dir, ec);
        if (ec)
            throw Error(ErrorCategory::kIo, out_dir + ": cannot create directory: " + ec.message());
        set_threads(threads);
    }

    // Writes `d` under every training name (the input and the target of an autoencoder); with
    // `input`, the first name (the input) holds it instead (a recency-weighted input).
    void write_training(const std::string& file, const Dataset& d,
                        const Dataset* input = nullptr) const {
        std::vector<Dataset> out;
        for (const std::string& n : name_list()) {
            out.push_back(out.empty() && input ? *input : d);
            out.back().name = n;
        }
        write(file, out);
    }

    void write_as(const std::string& file, Dataset d, const std::string& name) const {
        d.name = name;
        write(file, {std::move(d)});
    }

    void write(const std::string& file, const std::vector<Dataset>& datasets) const {
        write_datasets(path(file), datasets);
        if (!quiet) {
            const Dataset& d = datasets.front();
            std::printf("  %-24s %10llu rows x %7u columns, %10llu nonzeros\n", file.c_str(),
                        (unsigned long long)d.rows, d.cols, (unsigned long long)d.nnz());
        }
    }

    void write_index(const std::string& file, const LabelIndex& index) const {
        index.write(path(file));
        if (!quiet) std::printf("  %-24s %10zu labels\n", file.c_str(), index.size());
    }
};

int fixed_main(int argc, char** argv) {
    Common c;
    std::vector<std::string> train_paths, test_paths, validation_paths;
    double carve = 0.0;
    uint32_t seed = 1;
    std::string carve_from = "random";
    double recency = 0.0;
    bool drop_unknown = false;
    ArgParser args("split fixed",
                   "Converts published train/test(/validation) files with one shared users and "
                   "items index, so their rows and columns align. With --carve-validation F, "
                   "a seeded fraction F of each user's train items also goes to "
                   "validation.nc, and train_fit.nc holds the rest (train on train_fit, choose "
                   "epochs on validation, then evaluate test once). With --carve-from last the "
                   "validation items are each user's last ones in the order the train file lists "
                   "them (a temporal hold-out when lines list items oldest first); with "
                   "--recency TAU the input dataset of train.nc and train_fit.nc weighs each item "
                   "by exp(-age / TAU), age = the user's items listed after it.");
    c.add_to(args);
    args.add_list({"--train"}, &train_paths, "PATH", "training interactions", true);
    args.add_list({"--test"}, &test_paths, "PATH", "test interactions", true);
    args.add_list({"--validation"}, &validation_paths, "PATH", "validation interactions");
    args.add({"--carve-validation"}, &carve, "F",
             "fraction of each user's train items for validation (rounded to nearest)");
    args.add({"--seed"}, &seed, "N", "seed of --carve-validation (default 1)");
    args.add({"--carve-from"}, &carve_from, "WHERE",
             "random (a seeded draw, default) or last (each user's last items in the train "
             "file's order)");
    args.add({"--recency"}, &recency, "TAU",
             "weigh the training input by recency in the train file's order: exp(-age / TAU)");
    args.add_flag({"--drop-unknown"}, &drop_unknown,
                  "drop test/validation items never seen in train instead of failing");
    if (!args.parse(argc, argv)) return 0;
    if (args.given("--carve-validation") && !(carve > 0.0 && carve < 1.0)) {
        throw Error(ErrorCategory::kUsage, "option --carve-validation: expected 0 < F < 1");
    }
    if (carve_from != "random" && carve_from != "last") {
        throw Error(ErrorCategory::kUsage,
                    "option --carve-from: expected random or last, got '" + carve_from + "'");
    }
    if (args.given("--carve-from") && !args.given("--carve-validation")) {
        throw Error(ErrorCategory::kUsage, "option --carve-from: needs --carve-validation");
    }
    if (args.given("--seed") && carve_from == "last") {
        throw Error(ErrorCategory::kUsage,
                    "option --seed: --carve-from last draws nothing (the order decides)");
    }
    if (args.given("--recency") && !(recency > 0.0 && std::isfinite(recency))) {
        throw Error(ErrorCategory::kUsage, "option --recency: expected a number TAU > 0");
    }
    if (args.given("--recency") && carve > 0.0 && carve_from == "random") {
        throw Error(ErrorCategory::kUsage,
                    "option --recency: a random carve-out leaves train_fit.nc's items without "
                    "their order; use --carve-from last");
    }
    c.prepare();
    ConvertOptions options = c.convert_options();
    LabelIndex users, items;
    // Train in the file's order: --carve-from last and --recency read it.
    const Interactions train_in =
        read_interactions(expand_input_paths(train_paths), options, users, items);
    options.grow_features = false;  // items are defined by train
    options.unknown = drop_unknown ? UnknownFeatures::kDrop : UnknownFeatures::kError;
    ConvertStats test_stats, validation_stats;
    Dataset test =
        convert_text(expand_input_paths(test_paths), "heldout", options, users, items, &test_stats);
    Dataset validation;
    if (!validation_paths.empty()) {
        validation = convert_text(expand_input_paths(validation_paths), "heldout", options, users,
                                  items, &validation_stats);
    }
    // Users first seen in test or validation got rows there: give every file the same rows.
    auto pad_rows = [&](Dataset d) {
        while (d.rows < users.size()) {
            d.offsets.push_back(d.offsets.back());
            ++d.rows;
        }
        return d;
    };
    const uint64_t rows = users.size();
    const auto cols = static_cast<uint32_t>(items.size());
    // The training file: the input dataset weighted by recency when asked, the others 0/1.
    auto write_training = [&](const std::string& file, const Interactions& in) {
        const Dataset d = to_dataset(in, "train", rows, cols);
        if (recency <= 0.0) return c.write_training(file, d);
        const Dataset input = to_dataset(recency_weighted(in, rows, recency), "train", rows, cols);
        c.write_training(file, d, &input);
    };
    if (!c.quiet) std::printf("split fixed: wrote to %s\n", c.out_dir.c_str());
    write_training("train.nc", train_in);
    c.write_as("test.nc", pad_rows(std::move(test)), "heldout");
    if (!validation_paths.empty()) {
        c.write_as("validation.nc", pad_rows(std::move(validation)), "heldout");
    }
    if (carve > 0.0 && carve_from == "last") {
        const auto [fit, carved] = carve_last(train_in, rows, carve);
        write_training("train_fit.nc", fit);
        c.write_as("validation.nc", to_dataset(carved, "validation", rows, cols), "heldout");
    } else if (carve > 0.0) {
        auto [fit, carved] = carve_rows(to_dataset(train_in, "train", rows, cols), carve, seed);
        c.write_training("train_fit.nc", fit);
        c.write_as("validation.nc", carved, "heldout");
    }
    c.write_index("users.index", users);
    c.write_index("items.index", items);
    const uint64_t dropped = test_stats.dropped_unknown + validation_stats.dropped_unknown;
    if (dropped > 0 && !c.quiet) {
        std::printf("dropped %llu test/validation interactions with items not in train\n",
                    (unsigned long long)dropped);
    }
    return 0;
}

int strong_main(int argc, char** argv) {
    Common c;
    std::vector<std::string> inputs;
    StrongSplitOptions s;
    double min_rating = 0.0;
    ArgParser args("split strong",
                   "Strong generalization as in Liang et al. 2018 (dawenl/vae_cf), step for "
                   "step and with numpy's random stream: keep interactions with rating >= "
                   "--min-rating, users with >= --min-items of them; permute users (seed); the "
                   "last 2 x --heldout-users are validation and test users; items are the "
                   "training users' items; each held-out user's items are split into fold-in "
                   "(input) and held-out (to predict). ML-20M reference: --min-rating 4 "
                   "--heldout-users 10000 (ratings are half stars, so >= 4 is > 3.5).");
    c.add_to(args);
    args.add_list({"-i", "--input"}, &inputs, "PATH", "ratings file(s)", true);
    args.add({"--min-rating"}, &min_rating, "R", "keep ratings >= R (default: keep all)");
    args.add({"--min-items"}, &s.min_items, "N", "minimum interactions per user (default 5)");
    args.add({"--heldout-users"}, &s.heldout_users, "N",
             "validation users, and as many test users (default 10000)");
    args.add({"--heldout-fraction"}, &s.heldout_fraction, "F",
             "fraction of a held-out user's items to predict (default 0.2)");
    args.add({"--seed"}, &s.seed, "N", "seed (default 98765, the reference's)");
    if (!args.parse(argc, argv)) return 0;
    c.prepare();
    ConvertOptions options = c.convert_options();
    if (args.given("--min-rating")) options.min_rating = min_rating;
    const std::vector<std::string> files = expand_input_paths(inputs);
    LabelIndex users, items;
    ConvertStats stats;
    const Interactions in = read_interactions(files, options, users, items, &stats);
    const StrongSplit split = strong_generalization_split(in, users, items, s);
    if (!c.quiet) {
        std::printf(
            "split strong: %llu interactions kept (%llu below the minimum rating), "
            "%llu of %zu users have >= %u; %llu train / %llu validation / %llu test "
            "users, %zu items\n",
            (unsigned long long)stats.interactions, (unsigned long long)stats.below_min_rating,
            (unsigned long long)split.users_kept, users.size(), s.min_items,
            (unsigned long long)split.train.rows, (unsigned long long)split.validation_fold_in.rows,
            (unsigned long long)split.test_fold_in.rows, split.items.size());
        std::printf("wrote to %s\n", c.out_dir.c_str());
    }
    const std::string input_name = c.name_list().front();
    c.write_training("train.nc", split.train);
    c.write_as("validation_fold_in.nc", split.validation_fold_in, input_name);
    c.write_as("validation_heldout.nc", split.validation_heldout, "heldout");
    c.write_as("test_fold_in.nc", split.test_fold_in, input_name);
    c.write_as("test_heldout.nc", split.test_heldout, "heldout");
    c.write_index("items.index", split.items);
    c.write_index("train_users.index", split.train_users);
    c.write_index("validation_users.index", split.validation_users);
    c.write_index("test_users.index", split.test_users);
    return 0;
}

int random_main(int argc, char** argv) {
    Common c;
    std::vector<std::string> inputs;
    double min_rating = 0.0, test_fraction = 0.2;
    uint32_t seed = 1;
    ArgParser args("split random",
                   "DSSTNE's protocol: a seeded random fraction of all interactions is the test "
                   "set (train items are excluded when ranking), the rest is train.");
    c.add_to(args);
    args.add_list({"-i", "--input"}, &inputs, "PATH", "interaction file(s)", true);
    args.add({"--min-rating"}, &min_rating, "R", "keep ratings >= R (default: keep all)");
    args.add({"--test-fraction"}, &test_fraction, "F", "fraction to test (default 0.2)");
    args.add({"--seed"}, &seed, "N", "seed (default 1)");
    if (!args.parse(argc, argv)) return 0;
    c.prepare();
    ConvertOptions options = c.convert_options();
    if (args.given("--min-rating")) options.min_rating = min_rating;
    const std::vector<std::string> files = expand_input_paths(inputs);
    LabelIndex users, items;
    const Interactions in = read_interactions(files, options, users, items);
    auto [train, test] =
        random_split(in, users.size(), static_cast<uint32_t>(items.size()), test_fraction, seed);
    if (!c.quiet) std::printf("split random: wrote to %s\n", c.out_dir.c_str());
    c.write_training("train.nc", train);
    c.write_as("test.nc", test, "heldout");
    c.write_index("users.index", users);
    c.write_index("items.index", items);
    return 0;
}

}  // namespace

int split_main(int argc, char** argv) {
    if (argc < 1 || !std::strcmp(argv[0], "--help") || !std::strcmp(argv[0], "-h")) {
        std::fputs(kUsage, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    const std::string protocol = argv[0];
    auto run = [&](int (*body)(int, char**)) {
        return run_command("split " + protocol, [&]() { return body(argc - 1, argv + 1); });
    };
    if (protocol == "fixed") return run(fixed_main);
    if (protocol == "strong") return run(strong_main);
    if (protocol == "random") return run(random_main);
    std::fprintf(stderr, "sparsenet split: unknown protocol '%s'\n\n%s", protocol.c_str(), kUsage);
    return 2;
}

}  // namespace sparsenet::cli
