// Helpers of the ANN index tests (recommender_ann_test.cpp, recommender_ann16_test.cpp): small
// autoencoders saved to files, random queries with filters, exact comparison of answers.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet::testing::ann {

// Input -> Hidden (Tanh) -> Output (`output` activation); `tied`: the output edge uses the
// input edge's matrix transposed (SharedWeights).
inline NetworkConfig config(const std::string& output, uint32_t hidden, bool tied = false) {
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
      "Version": 0.9, "Name": "ann-test", "Kind": "AutoEncoder", "ErrorFunction": "L2",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": )" +
                                    std::to_string(hidden) +
                                    R"(, "Activation": "Tanh"},
        )" + out + "]}");
}

inline std::string save_network(const NetworkConfig& c, uint32_t items, const std::string& path,
                                uint64_t seed = 3) {
    NetworkOptions options;
    options.device = "cpu";
    options.seed = seed;
    Network net = Network::create(c, {{"in", items}, {"out", items}}, options);
    // Biases that differ per item (popularity), so that [w, b] vectors differ in norm.
    std::vector<float> b = net.get_parameter("bias:Output");
    std::mt19937 rng{uint32_t(seed)};
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (float& v : b) v += normal(rng);
    net.set_parameter("bias:Output", b);
    net.save(path);
    return path;
}

inline RecommenderOptions with_ann(const std::string& path, uint32_t probe = 0) {
    RecommenderOptions o;
    o.ann_index = path;
    o.ann_probe = probe;
    return o;
}

// Random queries with varied k, exclusions, allow and deny lists.
inline RecommendOptions random_options(std::mt19937& rng, uint32_t items, uint32_t i) {
    RecommendOptions o;
    const uint32_t ks[] = {1, 10, 50, items + 5};
    o.k = ks[rng() % 4];
    o.exclude_inputs = rng() % 4 != 0;
    if (rng() % 4 == 0)
        for (int d = 0; d < 30; ++d) o.deny.emplace_back(rng() % items);
    if (i % 5 == 1)  // a short allow list
        for (int a = 0; a < 25; ++a) o.allow.emplace_back(rng() % items);
    if (i % 5 == 3)  // a long one: most items
        for (uint32_t a = 0; a < items; ++a)
            if (rng() % 8 != 0) o.allow.emplace_back(a);
    return o;
}

inline void expect_same(const Recommendations& got, const Recommendations& want, uint32_t query) {
    ASSERT_EQ(got.items.size(), want.items.size()) << "query " << query;
    for (size_t r = 0; r < want.items.size(); ++r) {
        ASSERT_EQ(got.items[r].id, want.items[r].id) << "query " << query << " rank " << r;
        ASSERT_EQ(got.items[r].score, want.items[r].score) << "query " << query << " rank " << r;
    }
}

}  // namespace sparsenet::testing::ann
