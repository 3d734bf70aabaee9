// sparsenet info: what a dataset or model file holds, as text or as one JSON object.
#include <json/json.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "common.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/model_info.h"

namespace sparsenet::cli {
namespace {

// The row length of every example (stored rows repeat for indexed datasets), sorted.
std::vector<uint64_t> sorted_example_lengths(const Dataset& d) {
    std::vector<uint64_t> lengths(d.examples());
    for (uint64_t e = 0; e < lengths.size(); ++e) {
        lengths[e] = d.row_length(d.is_indexed() ? d.example_rows[e] : e);
    }
    std::sort(lengths.begin(), lengths.end());
    return lengths;
}

// Percentiles by the nearest-rank method: the p-th percentile is the smallest length with at
// least p% of the examples at or below it; the median is p50.
Json::Value row_length_stats(const std::vector<uint64_t>& sorted, uint64_t total) {
    const uint64_t n = sorted.size();
    auto percentile = [&](uint64_t p) -> Json::UInt64 {
        if (n == 0) return 0;
        const uint64_t rank = (p * n + 99) / 100;  // ceil(p/100 * n), >= 1
        return sorted[rank - 1];
    };
    Json::Value s;
    s["empty"] =
        Json::UInt64(std::upper_bound(sorted.begin(), sorted.end(), uint64_t{0}) - sorted.begin());
    s["min"] = Json::UInt64(n == 0 ? 0 : sorted.front());
    s["mean"] = n == 0 ? 0.0 : double(total) / double(n);
    s["median"] = percentile(50);
    s["p90"] = percentile(90);
    s["p99"] = percentile(99);
    s["max"] = Json::UInt64(n == 0 ? 0 : sorted.back());
    return s;
}

// A dense boolean dataset with one entry per row is a class label (DSSTNE's categorical data).
std::string kind_of(const Dataset& d) {
    if (!d.dense) return d.is_boolean() ? "sparse indicator" : "sparse analog";
    bool one_per_row = d.is_boolean();
    for (uint64_t r = 0; one_per_row && r < d.rows; ++r) one_per_row = d.row_length(r) == 1;
    return one_per_row ? "dense categorical" : "dense";
}

Json::Value dataset_info(const Dataset& d) {
    Json::Value v;
    v["name"] = d.name;
    v["kind"] = kind_of(d);
    v["weighted"] = d.is_weighted();
    v["indexed"] = d.is_indexed();
    v["ignore_zero"] = d.sparse_ignore_zero;
    v["examples"] = Json::UInt64(d.examples());
    v["stored_rows"] = Json::UInt64(d.rows);
    v["columns"] = Json::UInt64(d.cols);
    const std::vector<uint64_t> lengths = sorted_example_lengths(d);
    const uint64_t total = std::accumulate(lengths.begin(), lengths.end(), uint64_t{0});
    v["nonzeros"] = Json::UInt64(total);  // over the examples (what a network sees)
    v["stored_nonzeros"] = Json::UInt64(d.nnz());
    const double cells = double(d.examples()) * double(d.cols);
    v["density"] = cells > 0 ? double(total) / cells : 0.0;
    v["row_lengths"] = row_length_stats(lengths, total);
    return v;
}

Json::Value model_info(const ModelInfo& model) {
    const NetworkConfig& config = model.config;
    Json::Value v;
    v["name"] = config.name;
    v["kind"] = to_string(config.kind);
    v["loss"] = to_string(config.error_function);
    v["layers"] = Json::Value(Json::arrayValue);
    for (const LayerConfig& l : config.layers) {
        Json::Value layer;
        layer["name"] = l.name;
        layer["kind"] = to_string(l.kind);
        layer["n"] = l.n;
        layer["activation"] = l.kind == LayerKind::kInput ? "" : to_string(l.activation);
        layer["dataset"] = l.dataset;
        layer["sparse"] = l.sparse;
        if (l.normalize_l2 > 0.0f) layer["normalize_l2"] = l.normalize_l2;
        v["layers"].append(layer);
    }
    v["weights"] = Json::Value(Json::arrayValue);
    for (const ModelInfo::Weight& w : model.weights) {
        Json::Value weight;
        weight["from"] = w.from;
        weight["to"] = w.to;
        weight["rows"] = Json::UInt64(w.rows);
        weight["cols"] = Json::UInt64(w.cols);
        if (w.shared) {  // uses another edge's matrix: no parameters of its own
            Json::Value shares;
            shares["from"] = w.shares_from;
            shares["to"] = w.shares_to;
            shares["transposed"] = w.transposed;
            weight["shares"] = shares;
        }
        v["weights"].append(weight);
    }
    v["biases"] = Json::Value(Json::arrayValue);
    for (const ModelInfo::Bias& b : model.biases) {
        Json::Value bias;
        bias["layer"] = b.layer;
        bias["size"] = Json::UInt64(b.units);
        v["biases"].append(bias);
    }
    v["parameters"] = Json::UInt64(model.parameters);
    for (const auto& [layer, count] : model.feature_names) {  // names the Recommender resolves
        v["feature_names"][layer] = Json::UInt64(count);
    }
    if (model.checkpoint) {  // a checkpoint (train --checkpoint): where training stands
        const ModelInfo::Checkpoint& t = *model.checkpoint;
        Json::Value c;
        c["epochs_complete"] = t.epochs_complete;
        c["batches_done"] = Json::UInt64(t.batches_done);
        c["optimizer"] = t.optimizer;
        c["optimizer_steps"] = Json::UInt64(t.optimizer_steps);
        Json::Value options;
        Json::CharReaderBuilder reader;
        std::string errors;
        std::istringstream in(t.options);
        if (Json::parseFromStream(reader, in, &options, &errors)) c["options"] = options;
        v["checkpoint"] = c;
    }
    return v;
}

Json::Value file_info(const std::string& path) {
    Json::Value v;
    v["path"] = path;
    if (is_model_file(path)) {
        v["type"] = "model";
        v["model"] = model_info(read_model_info(path));
    } else {
        v["type"] = "datasets";
        v["datasets"] = Json::Value(Json::arrayValue);
        for (const Dataset& d : read_datasets(path)) v["datasets"].append(dataset_info(d));
    }
    return v;
}

std::string u64(const Json::Value& v) {
    return std::to_string(v.asUInt64());
}

void print_datasets(const Json::Value& file) {
    const Json::Value& datasets = file["datasets"];
    std::printf("%s: %u dataset%s\n", file["path"].asCString(), datasets.size(),
                datasets.size() == 1 ? "" : "s");
    for (const Json::Value& d : datasets) {
        std::string kind = d["kind"].asString();
        if (d["weighted"].asBool()) kind += ", weighted";
        if (d["indexed"].asBool()) kind += ", indexed";
        if (d["ignore_zero"].asBool()) kind += ", ignore zero";
        std::printf("dataset %s: %s\n", d["name"].asCString(), kind.c_str());
        std::string examples = u64(d["examples"]);
        std::string nonzeros = u64(d["nonzeros"]);
        if (d["indexed"].asBool()) {
            examples += " (" + u64(d["stored_rows"]) + " unique stored rows)";
            nonzeros += " (" + u64(d["stored_nonzeros"]) + " stored)";
        }
        const Json::Value& r = d["row_lengths"];
        std::printf("  examples     %s\n", examples.c_str());
        std::printf("  columns      %s\n", u64(d["columns"]).c_str());
        std::printf("  nonzeros     %s\n", nonzeros.c_str());
        std::printf("  density      %.6g\n", d["density"].asDouble());
        std::printf(
            "  row lengths  empty %s, min %s, mean %.2f, median %s, p90 %s, p99 %s, max %s\n",
            u64(r["empty"]).c_str(), u64(r["min"]).c_str(), r["mean"].asDouble(),
            u64(r["median"]).c_str(), u64(r["p90"]).c_str(), u64(r["p99"]).c_str(),
            u64(r["max"]).c_str());
    }
}

std::string padded(const std::string& s, size_t width) {
    return s + std::string(width > s.size() ? width - s.size() : 0, ' ');
}

void print_model(const Json::Value& file) {
    const Json::Value& m = file["model"];
    std::printf("%s: sparsenet model '%s' (%s), loss %s\n", file["path"].asCString(),
                m["name"].asCString(), m["kind"].asCString(), m["loss"].asCString());
    size_t width = 0;
    for (const Json::Value& l : m["layers"]) width = std::max(width, l["name"].asString().size());
    std::printf("layers\n");
    for (const Json::Value& l : m["layers"]) {
        std::string line = "  " + padded(l["name"].asString(), width) + "  " +
                           padded(l["kind"].asString(), 6) + "  N " + padded(u64(l["n"]), 8);
        line += "  " + padded(l["activation"].asString(), 15);
        if (!l["dataset"].asString().empty()) line += "  dataset " + l["dataset"].asString();
        if (l["sparse"].asBool()) line += " (sparse)";
        if (l.isMember("normalize_l2")) {
            char norm[64];
            std::snprintf(norm, sizeof norm, ", rows L2-normalised to %g",
                          l["normalize_l2"].asDouble());
            line += norm;
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        std::printf("%s\n", line.c_str());
    }
    std::printf("weights\n");
    uint64_t weights = 0;
    for (const Json::Value& w : m["weights"]) {
        const std::string link = w["from"].asString() + " -> " + w["to"].asString();
        std::string line =
            "  " + padded(link, 2 * width + 4) + "  " + u64(w["rows"]) + " x " + u64(w["cols"]);
        if (w.isMember("shares")) {
            const Json::Value& s = w["shares"];
            line += "  shares " + s["from"].asString() + " -> " + s["to"].asString() +
                    (s["transposed"].asBool() ? " (transposed)" : "");
        } else {
            weights += w["rows"].asUInt64() * w["cols"].asUInt64();
        }
        std::printf("%s\n", line.c_str());
    }
    const uint64_t total = m["parameters"].asUInt64();
    std::printf("parameters %llu (weights %llu, biases %llu)\n", (unsigned long long)total,
                (unsigned long long)weights, (unsigned long long)(total - weights));
    if (m.isMember("checkpoint")) {
        const Json::Value& c = m["checkpoint"];
        std::printf("checkpoint: %u epochs done", c["epochs_complete"].asUInt());
        if (c["batches_done"].asUInt64() > 0) {
            std::printf(" and %s batches of epoch %u", u64(c["batches_done"]).c_str(),
                        c["epochs_complete"].asUInt() + 1);
        }
        std::printf("; %s, %s steps", c["optimizer"].asCString(),
                    u64(c["optimizer_steps"]).c_str());
        if (c["options"].isMember("batch")) {
            std::printf("; batch %s, seed %s", c["options"]["batch"].asCString(),
                        c["options"]["seed"].asCString());
        }
        std::printf("\n");
    }
}

}  // namespace

int info_main(int argc, char** argv) {
    return run_command("info", [&]() {
        bool json = false;
        ArgParser args("info",
                       "sparsenet info [--json] FILE...: for each dataset of a dataset file its "
                       "kind, examples, columns, nonzeros, density and row-length distribution; "
                       "for a model file its layers, weight shapes, parameter count and loss.");
        args.add_flag({"--json"}, &json, "print one JSON object instead of text");
        // Every argument that is not an option is a file.
        std::vector<std::string> files;
        std::vector<char*> options;
        for (int i = 0; i < argc; ++i) {
            if (argv[i][0] == '-' && argv[i][1] != '\0') {
                options.push_back(argv[i]);
            } else {
                files.push_back(argv[i]);
            }
        }
        if (!args.parse(static_cast<int>(options.size()), options.data())) return 0;
        if (files.empty()) {
            throw Error(ErrorCategory::kUsage, "no file given; see 'sparsenet info --help'");
        }

        Json::Value all;
        all["files"] = Json::Value(Json::arrayValue);
        for (const std::string& path : files) all["files"].append(file_info(path));
        if (json) {
            Json::StreamWriterBuilder builder;
            builder["indentation"] = "  ";
            builder["precision"] = 15;  // 0.2, not 0.20000000000000001
            std::unique_ptr<Json::StreamWriter> writer(builder.newStreamWriter());
            writer->write(all, &std::cout);
            std::cout << "\n";
            return 0;
        }
        for (const Json::Value& file : all["files"]) {
            if (file["type"] == "model") {
                print_model(file);
            } else {
                print_datasets(file);
            }
        }
        return 0;
    });
}

}  // namespace sparsenet::cli
