// Helpers of the library tests (tests/library): small autoencoders, item names, random queries.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet::testing {

// Input -> Hidden (Tanh) -> Output (`output` activation); `tied`: the output edge uses the
// input edge's matrix transposed (SharedWeights).
inline NetworkConfig recommender_config(const std::string& output, uint32_t hidden,
                                        bool tied = false) {
    std::string out = R"({"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": ")" +
                      output +
                      R"(", "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -1.0})";
    if (tied) {
        out += R"(, "SharedWeights": {"InputLayer": "Hidden", "SourceInputLayer": "Input",
                  "SourceOutputLayer": "Hidden", "Transposed": true})";
    }
    out += "}";
    return NetworkConfig::from_json(R"({
      "Version": 0.9, "Name": "recommender-test", "Kind": "AutoEncoder", "ErrorFunction": "L2",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": )" +
                                    std::to_string(hidden) +
                                    R"(, "Activation": "Tanh"},
        )" + out + "]}");
}

// Input (dataset "in") -> Hidden (hidden units, Tanh) -> Output (dataset "out", Sigmoid).
inline NetworkConfig autoencoder_config(uint32_t hidden) {
    return NetworkConfig::from_json(R"({
      "Version": 0.9, "Name": "library-test", "Kind": "AutoEncoder",
      "ErrorFunction": "CrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": )" +
                                    std::to_string(hidden) +
                                    R"(, "Activation": "Tanh"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid", "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -2.0}}
      ]})");
}

// An untrained network with seeded Xavier weights over `items` items. threads 1: the
// concurrency test runs under ThreadSanitizer, where OpenMP teams give false reports.
inline Network random_network(uint32_t items, uint32_t hidden, uint64_t seed) {
    NetworkOptions options;
    options.device = "cpu";
    options.threads = 1;
    options.seed = seed;
    return Network::create(autoencoder_config(hidden), {{"in", items}, {"out", items}}, options);
}

// A network trained for a few epochs on a generated dataset with planted structure.
inline Network trained_network(uint32_t items, uint32_t hidden, uint64_t users, uint32_t epochs) {
    GenerateOptions g;
    g.users = users;
    g.items = items;
    g.nnz = users * 12;
    g.factors = 6;
    g.seed = 11;
    Dataset in = generate(g).train;
    Dataset out = in;
    in.name = "in";
    out.name = "out";
    Network net = Network::create(autoencoder_config(hidden), {{"in", in.cols}, {"out", out.cols}});
    TrainOptions t;
    t.epochs = epochs;
    t.batch = 32;
    t.optimizer.kind = OptimizerKind::kAdam;
    t.optimizer.learning_rate = 0.01f;
    Trainer trainer(net, {{"in", &in}, {"out", &out}}, t);
    trainer.fit();
    return net;
}

// Item labels for a features index: plain ones, plus a few that JSON must escape.
inline std::vector<std::string> item_names(uint32_t n) {
    std::vector<std::string> names;
    for (uint32_t i = 0; i < n; ++i) names.push_back("item-" + std::to_string(i));
    if (n > 3) {
        names[1] = "say \"hi\"";
        names[2] = "caf\xc3\xa9 back\\slash";
        names[3] = "x/y {1}";
    }
    return names;
}

// A random query: 1..max_items distinct ids below `items`, weights 1 or random.
inline std::vector<ItemRef> random_items(std::mt19937& rng, uint32_t items, uint32_t max_items,
                                         bool weighted) {
    std::vector<ItemRef> q;
    const uint32_t count = 1 + rng() % max_items;
    std::uniform_real_distribution<float> w(0.25f, 3.0f);
    for (uint32_t i = 0; i < count; ++i) {
        const uint32_t id = rng() % items;
        q.emplace_back(id, weighted ? w(rng) : 1.0f);
    }
    return q;
}

// The public headers (file names) of an include directory's sparsenet/ folder, sorted.
inline std::vector<std::string> public_headers(const std::string& include_dir) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(include_dir + "/sparsenet")) {
        if (e.path().extension() == ".h") names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

// Compiles `#include <sparsenet/<header>>` alone with `compiler -std=c++17` and only
// -I<include_dir>, twice: -fsyntax-only (the exit status), then -M (every file it read). Returns
// "" when it compiles and reads nothing but the C++ standard library and include_dir, else why.
inline std::string check_header_alone(const std::string& compiler, const std::string& include_dir,
                                      const std::string& header, const std::string& scratch_dir) {
    const std::string tu = scratch_dir + "/" + header + ".cpp";
    write_file(tu, "#include <sparsenet/" + header + ">\n#include <sparsenet/" + header +
                       ">\nint main() { return 0; }\n");
    const std::string base = "'" + compiler + "' -std=c++17 -I'" + include_dir + "' '" + tu + "'";
    std::string out;
    if (run_command(base + " -fsyntax-only -Wall -Wextra", &out) != 0) {
        return header + " does not compile alone:\n" + out;
    }
    if (run_command(base + " -M", &out) != 0) return header + ": -M failed:\n" + out;
    // Third-party libraries the library uses privately: none may be reachable from the API.
    static const char* kForbidden[] = {"netcdf", "json",     "cuda",   "/mpi", "nccl",
                                       "cblas",  "openblas", "/omp.h", "hdf5", "gtest"};
    std::string token;
    for (size_t i = 0; i <= out.size(); ++i) {
        const char c = i < out.size() ? out[i] : ' ';
        if (c != ' ' && c != '\n' && c != '\\') {
            token += c;
            continue;
        }
        if (token.empty() || token.back() == ':' || token == tu) {
            token.clear();
            continue;
        }
        // Our own headers: only the part below include_dir (a temporary path could hold
        // anything).
        if (token.rfind(include_dir, 0) == 0) token = token.substr(include_dir.size());
        std::string lower = token;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char ch) { return char(std::tolower(ch)); });
        for (const char* bad : kForbidden) {
            if (lower.find(bad) != std::string::npos) {
                return header + " reads " + token + " (a third-party header)";
            }
        }
        token.clear();
    }
    return "";
}

inline bool same_recommendations(const Recommendations& a, const Recommendations& b,
                                 std::string* why) {
    if (a.items.size() != b.items.size()) {
        *why = "sizes " + std::to_string(a.items.size()) + " vs " + std::to_string(b.items.size());
        return false;
    }
    for (size_t i = 0; i < a.items.size(); ++i) {
        const Recommendation& x = a.items[i];
        const Recommendation& y = b.items[i];
        if (x.id != y.id || x.name != y.name || x.score != y.score) {
            *why = "rank " + std::to_string(i) + ": " + std::to_string(x.id) + " (" +
                   std::to_string(x.score) + ") vs " + std::to_string(y.id) + " (" +
                   std::to_string(y.score) + ")";
            return false;
        }
    }
    if (a.unknown != b.unknown) {
        *why = "different unknown items";
        return false;
    }
    return true;
}

}  // namespace sparsenet::testing
