// sparsenet convert: text interactions -> netCDF dataset (DSSTNE's generateNetCDF, flags kept).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "args.h"
#include "common.h"
#include "sparsenet/convert.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet::cli {
namespace {

bool exists(const std::string& path) {
    std::error_code ec;
    return std::filesystem::exists(path, ec);
}

}  // namespace

int convert_main(int argc, char** argv) {
    return run_command("convert", [&]() {
        std::vector<std::string> inputs;
        std::string output, names, features_path, samples_path, type = "indicator";
        std::string format = "auto", ids = "default";
        double min_rating = 0.0;
        uint32_t width = 0;
        bool create = false, merge = false, drop_unknown = false, quiet = false, verbose = false;
        int threads = 0;
        ArgParser args(
            "convert",
            "Converts interaction text files into a netCDF dataset in DSSTNE's layout (exact "
            "width, 64-bit offsets, compressed). Formats: dsstne (sample<TAB>feature[,value]:...), "
            "csv (MovieLens ratings.csv), tsv (MovieLens 100K u.data), dat (MovieLens 1M "
            "ratings.dat), user-items or lightgcn (LightGCN splits: user item item ...). Rows "
            "follow the samples index (-s) and columns the features index (-f), so several "
            "conversions that share an index always align. Without -f and -s the ids must be "
            "numbers and are the indices themselves: row = user id, column = item id, width = "
            "the largest item id + 1 (or --width).");
        args.add_list({"-i", "--input"}, &inputs, "PATH",
                      "text file, or directory of files (read in name order); repeatable", true);
        args.add({"-o", "--output"}, &output, "FILE.nc", "netCDF file to write", true);
        args.add({"-d", "--dataset"}, &names, "NAME[,NAME]",
                 "dataset name(s); each name gets the same data (e.g. gl_input,gl_output)", true);
        args.add({"-f", "--features"}, &features_path, "FILE",
                 "features index (label<TAB>index): read and kept fixed, or created with -c, "
                 "or extended with -m; none: feature ids are the column numbers");
        args.add({"-s", "--samples"}, &samples_path, "FILE",
                 "samples index: read when it exists (new samples are appended), written back; "
                 "none: sample ids are the row numbers");
        args.add({"--width"}, &width, "N",
                 "columns of the dataset: at least the largest feature index + 1 (default "
                 "exactly that)");
        args.add_flag({"-c", "--create-features"}, &create,
                      "create the features index (overwrites it)");
        args.add_flag({"-m", "--merge-features"}, &merge,
                      "add new features to the existing features index");
        args.add({"-t", "--type"}, &type, "indicator|analog",
                 "drop values (indicator, default) or keep them (analog)");
        args.add({"--format"}, &format, "FMT",
                 "auto (default), dsstne, csv, tsv, dat, user-items or lightgcn (the same)");
        args.add({"--min-rating"}, &min_rating, "R",
                 "keep only interactions whose value (rating) is >= R");
        args.add({"--ids"}, &ids, "MODE",
                 "numeric (labels are the indices) or first-seen (DSSTNE's numbering); default: "
                 "numeric for user-items, first-seen otherwise");
        args.add_flag({"--drop-unknown"}, &drop_unknown,
                      "drop features that are not in a fixed features index (counted and "
                      "printed) instead of failing");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add_flag({"-q", "--quiet"}, &quiet, "print nothing but errors");
        args.add_flag({"-v", "--verbose"}, &verbose, "also print the time of each phase");
        if (!args.parse(argc, argv)) return 0;

        if (create && merge) throw Error(ErrorCategory::kUsage, "-c and -m exclude each other");
        if (type != "indicator" && type != "analog") {
            throw Error(ErrorCategory::kUsage,
                        "option -t: expected indicator or analog, got '" + type + "'");
        }
        const std::vector<std::string> name_list = split_list(names, "-d");
        ConvertOptions options;
        options.format = parse_text_format(format);
        options.analog = type == "analog";
        if (args.given("--min-rating")) options.min_rating = min_rating;
        options.ids = parse_id_mode(ids);
        // No index files: the ids are numbers used as the indices themselves.
        if (features_path.empty() || samples_path.empty()) {
            if (options.ids == IdMode::kFirstSeen) {
                throw Error(ErrorCategory::kUsage,
                            "--ids first-seen numbers labels through index files; give both -f "
                            "and -s (or leave --ids out: without index files ids are indices)");
            }
            options.ids = IdMode::kNumeric;
        }
        if (features_path.empty() && (create || merge)) {
            throw Error(ErrorCategory::kUsage,
                        std::string(create ? "-c" : "-m") + " needs a features index file (-f)");
        }
        if (args.given("--width") && width == 0) {
            throw Error(ErrorCategory::kUsage, "option --width: must be at least 1");
        }
        options.grow_features = create || merge || features_path.empty();
        options.unknown = drop_unknown ? UnknownFeatures::kDrop : UnknownFeatures::kError;
        if (drop_unknown && options.grow_features) {
            throw Error(ErrorCategory::kUsage,
                        "--drop-unknown needs a fixed features index (-f, not with -c or -m)");
        }
        set_threads(threads);

        LabelIndex features;
        if (!create && !features_path.empty()) {
            if (!exists(features_path)) {
                throw Error(ErrorCategory::kIo,
                            features_path + ": features index does not exist; create it with -c");
            }
            features = LabelIndex::read(features_path);
        }
        LabelIndex samples;
        if (!samples_path.empty() && exists(samples_path)) {
            samples = LabelIndex::read(samples_path);
        }
        const size_t samples_before = samples.size();
        const std::vector<std::string> files = expand_input_paths(inputs);
        check_writable(output);

        const auto start = std::chrono::steady_clock::now();
        ConvertStats stats;
        Dataset data = convert_text(files, name_list[0], options, samples, features, &stats);
        if (args.given("--width")) {
            if (width < data.cols) {
                throw Error(
                    ErrorCategory::kData,
                    "option --width: " + std::to_string(width) + " columns, but " +
                        (features_path.empty()
                             ? "the input has feature id " + std::to_string(data.cols - 1)
                             : features_path + " has " + std::to_string(data.cols) + " features") +
                        "; expected at least " + std::to_string(data.cols));
            }
            data.cols = width;
        }
        // The features index travels in the file, so that a model trained on it knows its names.
        if (!features_path.empty()) {
            data.feature_names.reserve(features.size());
            for (uint32_t c = 0; c < features.size(); ++c) {
                data.feature_names.push_back(features.label(c));
            }
        }
        std::vector<Dataset> out;
        for (const std::string& n : name_list) {
            out.push_back(data);
            out.back().name = n;
        }
        const auto write_start = std::chrono::steady_clock::now();
        write_datasets(output, out);
        const double write_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
        if ((create || merge) && !features_path.empty()) features.write(features_path);
        if (!samples_path.empty() && (samples.size() != samples_before || !exists(samples_path))) {
            samples.write(samples_path);
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!quiet) {
            std::printf("read %llu line%s from %llu file%s (format %s%s)\n",
                        (unsigned long long)stats.lines, stats.lines == 1 ? "" : "s",
                        (unsigned long long)stats.files, stats.files == 1 ? "" : "s",
                        to_string(stats.format), stats.header_skipped ? ", header skipped" : "");
            if (options.min_rating) {
                std::printf("kept interactions with value >= %g; %llu below it were skipped\n",
                            *options.min_rating, (unsigned long long)stats.below_min_rating);
            }
            if (stats.dropped_unknown > 0) {
                std::printf("dropped %llu interaction%s with %llu distinct feature%s not in %s\n",
                            (unsigned long long)stats.dropped_unknown,
                            stats.dropped_unknown == 1 ? "" : "s",
                            (unsigned long long)stats.distinct_dropped,
                            stats.distinct_dropped == 1 ? "" : "s", features_path.c_str());
            }
            std::printf("wrote %s: %s %llu rows x %u columns, %llu nonzeros (%s)\n", output.c_str(),
                        names.c_str(), (unsigned long long)data.rows, data.cols,
                        (unsigned long long)data.nnz(), options.analog ? "analog" : "indicator");
            if (samples_path.empty()) {
                std::printf("no samples index: row = sample id (largest + 1 = %zu rows)",
                            samples.size());
            } else {
                std::printf("samples index %s: %zu samples (%llu new)", samples_path.c_str(),
                            samples.size(), (unsigned long long)stats.new_samples);
            }
            if (stats.samples_without_line > 0) {
                std::printf(", %llu with no interactions in this input (empty rows)",
                            (unsigned long long)stats.samples_without_line);
            }
            if (features_path.empty()) {
                std::printf("\nno features index: column = feature id (%u columns)\n", data.cols);
            } else {
                std::printf("\nfeatures index %s: %zu features (%llu new)\n", features_path.c_str(),
                            features.size(), (unsigned long long)stats.new_features);
            }
            if (verbose) {
                std::printf(
                    "phases: parse %.2fs, index merge %.2fs, CSR build %.2fs, "
                    "netCDF write %.2fs\n",
                    stats.parse_seconds, stats.merge_seconds, stats.build_seconds, write_seconds);
            }
            std::printf("%.2fs\n", seconds);
        }
        return 0;
    });
}

}  // namespace sparsenet::cli
