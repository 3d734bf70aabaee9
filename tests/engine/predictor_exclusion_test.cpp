// Predictor::top_k's exclusion: the row's own inputs are read from their upload for the forward
// pass (not uploaded again), with the same result as an equal dataset uploaded on its own; and
// PredictOptions::timings adds up both phases. And the output activation applied inside the
// selection (issue 45) ranks and reports the activated scores bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

TEST(PredictorExclusion, InputsAsTheExclusionGiveWhatAnEqualCopyGives) {
    const Dataset in =
        testing::random_dataset(300, 80, testing::RowShape::kPowerLaw, false, 3, "in");
    NetworkOptions options;
    options.device = "cpu";
    options.seed = 5;
    Network net = Network::create(NetworkConfig::from_json(testing::sparse_autoencoder_json(16)),
                                  {{"in", in.cols}, {"out", in.cols}}, options);
    Predictor predictor(net, {{"in", &in}});
    PredictOptions po;
    po.k = 20;
    po.batch = 64;
    PredictTimings timings;
    po.timings = &timings;
    const TopK own = predictor.top_k(po, &in);  // the upload of the input itself
    EXPECT_GT(timings.score, 0.0);
    EXPECT_GT(timings.top_k, 0.0);
    po.timings = nullptr;
    const Dataset copy = in;  // another dataset: uploaded for the exclusion
    const TopK separate = predictor.top_k(po, &copy);
    EXPECT_EQ(own.indices, separate.indices);
    EXPECT_EQ(own.scores, separate.scores);
    // Every row's own items are excluded, and excluding nothing brings some back.
    const TopK none = predictor.top_k(po, nullptr);
    bool returned = false;
    for (uint64_t r = 0; r < in.rows; ++r) {
        for (uint64_t e = in.offsets[r]; e < in.offsets[r + 1]; ++e) {
            for (uint32_t i = 0; i < po.k; ++i) {
                EXPECT_NE(own.indices[r * po.k + i], in.indices[e]) << "row " << r;
                returned = returned || none.indices[r * po.k + i] == in.indices[e];
            }
        }
    }
    EXPECT_TRUE(returned);
}

// The scores Predictor::scores gives (the forward pass with its activation pass), ranked here
// by a sort: higher score first, ties to the lower column, NaN and excluded columns skipped.
TopK sorted_top_k(const std::vector<float>& scores, uint64_t rows, uint32_t n, uint32_t k,
                  const Dataset& exclude) {
    TopK t;
    t.rows = rows;
    t.k = k;
    t.scores.assign(rows * k, -std::numeric_limits<float>::infinity());
    t.indices.assign(rows * k, std::numeric_limits<uint32_t>::max());
    for (uint64_t r = 0; r < rows; ++r) {
        std::vector<std::pair<float, uint32_t>> all;
        for (uint32_t c = 0; c < n; ++c) {
            const float v = scores[r * n + c];
            const auto b = exclude.indices.begin() + std::ptrdiff_t(exclude.offsets[r]);
            const auto e = exclude.indices.begin() + std::ptrdiff_t(exclude.offsets[r + 1]);
            if (!std::isnan(v) && !std::binary_search(b, e, c)) all.push_back({v, c});
        }
        std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) {
            return x.first > y.first || (x.first == y.first && x.second < y.second);
        });
        for (size_t i = 0; i < std::min<size_t>(k, all.size()); ++i) {
            t.scores[r * k + i] = all[i].first;
            t.indices[r * k + i] = all[i].second;
        }
    }
    return t;
}

TEST(PredictorActivation, TopKRanksTheActivatedScoresBitForBit) {
    const Dataset in =
        testing::random_dataset(150, 70, testing::RowShape::kPowerLaw, false, 4, "in");
    // Saturating kinds (Sigmoid, Tanh: equal activations from different z, ties to the lower
    // column), ReLU (ties at 0), and SoftMax (not fused: its separate pass is kept).
    for (const Activation kind :
         {Activation::kSigmoid, Activation::kTanh, Activation::kRectifiedLinear,
          Activation::kLinear, Activation::kSoftPlus, Activation::kScaledExponentialLinear,
          Activation::kSoftMax}) {
        NetworkConfig config = NetworkConfig::from_json(testing::sparse_autoencoder_json(16));
        for (LayerConfig& l : config.layers)
            if (l.kind == LayerKind::kOutput) l.activation = kind;
        NetworkOptions options;
        options.device = "cpu";
        options.seed = 11;
        Network net = Network::create(config, {{"in", in.cols}, {"out", in.cols}}, options);
        // Large weights: many Sigmoid and Tanh outputs saturate to exactly 1.
        for (const Parameter& p : net.parameters()) {
            std::vector<float> w = net.get_parameter(p.name);
            const bool weight = p.name.rfind("weight:", 0) == 0;
            for (size_t i = 0; i < w.size(); ++i)  // and biases that the fused path must add
                w[i] = weight ? w[i] * 40.0f : float(int(i % 7) - 3) * 0.3f;
            net.set_parameter(p.name, w);
        }
        Predictor predictor(net, {{"in", &in}});
        PredictOptions po;
        po.k = 25;
        po.batch = 32;
        const TopK top = predictor.top_k(po, &in);
        // In the same batches as top_k's: a GEMM's bits depend on its row count (the BLAS's
        // blocking), so scores of other batches could differ in the last bit.
        std::vector<float> scores;
        for (uint64_t first = 0; first < in.rows; first += po.batch) {
            const uint32_t count = uint32_t(std::min<uint64_t>(po.batch, in.rows - first));
            const std::vector<float> part = predictor.scores(first, count);
            scores.insert(scores.end(), part.begin(), part.end());
        }
        const TopK want = sorted_top_k(scores, in.rows, in.cols, po.k, in);
        EXPECT_EQ(top.indices, want.indices) << to_string(kind);
        size_t differ = 0;
        for (size_t i = 0; i < top.scores.size(); ++i) {
            if (std::memcmp(&top.scores[i], &want.scores[i], 4) != 0 && ++differ <= 3) {
                ADD_FAILURE() << to_string(kind) << " slot " << i << ": " << top.scores[i]
                              << ", the activation pass's " << want.scores[i];
            }
        }
        EXPECT_EQ(differ, 0u) << to_string(kind);
    }
}

}  // namespace
}  // namespace sparsenet
