// fp16 screening (RecommenderOptions::fp16_screening): the fp16 product against a double
// reference, fp16 rounding, and the screened Recommender against the full path on many queries
// and output activations: the same ids, the same scores bit for bit, the same tie order
// (saturated Sigmoid, ReLU's zeros), shared transposed weights, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "engine/network_impl.h"
#include "engine/output_screen.h"
#include "library/library_test_util.h"
#include "sparsenet/error.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

// A random network saved to `path`, its output weights multiplied by `output_scale`.
std::string save_network(const NetworkConfig& c, uint32_t items, const std::string& path,
                         float output_scale = 1.0f) {
    NetworkOptions options;
    options.device = "cpu";
    options.seed = 3;
    Network net = Network::create(c, {{"in", items}, {"out", items}}, options);
    if (output_scale != 1.0f) {
        std::vector<float> w = net.get_parameter("weight:Hidden->Output");
        for (float& v : w) v *= output_scale;
        net.set_parameter("weight:Hidden->Output", w);
    }
    net.save(path);
    return path;
}

// The screened and the full Recommender agree on `queries` random queries (k, exclusions,
// allow and deny lists varied). Returns how many results were compared.
void expect_same_rankings(const std::string& model, uint32_t queries, uint64_t seed) {
    RecommenderOptions screened_options;
    screened_options.fp16_screening = true;
    const Recommender full(model);
    const Recommender screened(model, screened_options);
    ASSERT_TRUE(screened.screening());
    ASSERT_FALSE(full.screening());
    const uint32_t items = full.output_items();
    std::mt19937 rng(seed);
    for (uint32_t i = 0; i < queries; ++i) {
        const std::vector<ItemRef> items_of_query =
            testing::random_items(rng, items, 40, /*weighted=*/i % 3 == 0);
        RecommendOptions o;
        const uint32_t ks[] = {1, 10, 50, items + 5};
        o.k = ks[rng() % 4];
        o.exclude_inputs = rng() % 4 != 0;
        if (rng() % 5 == 0)
            for (int d = 0; d < 30; ++d) o.deny.emplace_back(rng() % items);
        if (rng() % 7 == 0)
            for (int a = 0; a < 25; ++a) o.allow.emplace_back(rng() % items);
        const Recommendations want = full.recommend(items_of_query, o);
        const Recommendations got = screened.recommend(items_of_query, o);
        ASSERT_EQ(got.items.size(), want.items.size()) << "query " << i;
        for (size_t r = 0; r < want.items.size(); ++r) {
            ASSERT_EQ(got.items[r].id, want.items[r].id) << "query " << i << " rank " << r;
            ASSERT_EQ(got.items[r].score, want.items[r].score) << "query " << i << " rank " << r;
        }
    }
}

TEST(Fp16, RoundsToNearestEven) {
    using engine::from_fp16;
    using engine::to_fp16;
    EXPECT_EQ(to_fp16(1.0f), 0x3c00);
    EXPECT_EQ(to_fp16(-2.0f), 0xc000);
    EXPECT_EQ(to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(to_fp16(65520.0f), 0x7c00);             // beyond the largest finite: infinity
    EXPECT_EQ(to_fp16(1.0f + 0x1p-11f), 0x3c00);      // a tie: to the even neighbour
    EXPECT_EQ(to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // a tie: to the even neighbour
    EXPECT_EQ(to_fp16(0x1p-24f), 0x0001);             // the smallest subnormal
    EXPECT_EQ(from_fp16(0x3555), 0x1.554p-2f);
    for (float v : {0.1f, -3.75f, 1e-5f, 1234.5f}) {
        const float back = from_fp16(to_fp16(v));
        EXPECT_LE(std::fabs(back - v), std::fabs(v) * 0x1p-11f + 0x1p-25f) << v;
    }
}

// Every row count the kernel blocks differently (one to six rows per pass, and more), widths
// that leave the last panel partly empty, one and two threads.
TEST(Fp16, ProductMatchesADoubleReference) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t k : {1, 7, 8, 19, 64}) {
        for (size_t n : {1, 5, 16, 17, 1003, 2100}) {  // 2100: 132 panels, 3 chunks
            std::vector<uint16_t> w(k * n), panels(engine::fp16_panel_size(k, n), 0xffff);
            for (uint16_t& v : w) v = engine::to_fp16(normal(rng));
            for (size_t q = 0; q < k; ++q)
                for (size_t j = 0; j < n; ++j)
                    panels[engine::fp16_panel_offset(k, q, j)] = w[q * n + j];
            for (size_t rows : {1, 2, 5, 6, 7, 13}) {
                std::vector<float> x(rows * k);
                for (float& v : x) v = normal(rng);
                for (int threads : {1, 2}) {
                    std::vector<float> z(rows * n + 1, std::nanf(""));
                    z[rows * n] = 42.0f;  // past the end: left alone
                    engine::fp16_product(x.data(), rows, k, panels.data(), n, z.data(), threads);
                    EXPECT_EQ(z[rows * n], 42.0f);
                    for (size_t r = 0; r < rows; ++r) {
                        for (size_t j = 0; j < n; ++j) {
                            double exact = 0.0, magnitude = 0.0;
                            for (size_t q = 0; q < k; ++q) {
                                const double t =
                                    double(x[r * k + q]) * engine::from_fp16(w[q * n + j]);
                                exact += t;
                                magnitude += std::fabs(t);
                            }
                            ASSERT_NEAR(z[r * n + j], exact,
                                        double(k + 1) * 0x1p-24 * magnitude + 1e-30)
                                << "k " << k << " n " << n << " rows " << rows << " r " << r
                                << " j " << j << " threads " << threads;
                        }
                    }
                }
            }
        }
    }
}

class ScreenTest : public ::testing::Test {
  protected:
    testing::TempDir dir_;
};

struct ScreenStats {
    int ranked = 0;         // queries the screen ranked (the others fall back)
    double candidates = 0;  // mean items recomputed per ranked query
    int tied_at_one = 0;    // ranked queries whose top-k held several scores of exactly 1
};

// OutputScreen::rank against the full product (gemm over the whole matrix, bias and activation,
// top_k) on random source activations tanh(scale * N(0, 1)): equal ids and scores wherever the
// screen ranks.
ScreenStats screen_against_full_product(const std::string& model, uint32_t k, int queries,
                                        float scale) {
    NetworkOptions options;
    options.device = "cpu";
    Network net = Network::load(model, options);
    const Network::Impl& impl = net.impl();
    const int output = 2;
    EXPECT_EQ(impl.graph.layers[output].config.name, "Output");
    const engine::GraphLayer& layer = impl.graph.layers[output];
    const engine::GraphEdge& edge = impl.graph.edges[layer.in_weights[0]];
    const size_t hidden = edge.rows, items = edge.cols;
    engine::OutputScreen screen(net, output, 1);
    auto backend = make_backend("cpu", 1);
    engine::ScreenScratch scratch;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> h(hidden), scores(k), full(items), full_scores(k);
    std::vector<uint32_t> ids(k), full_ids(k);
    ScreenStats stats;
    for (int i = 0; i < queries; ++i) {
        for (float& v : h) v = std::tanh(scale * normal(rng));
        const engine::ScreenResult r =
            screen.rank(*backend, h.data(), {}, k, scratch, scores.data(), ids.data());
        EXPECT_GE(r.candidates, size_t(k));
        if (!r.ranked) continue;
        ++stats.ranked;
        stats.candidates += double(r.candidates);
        const MatrixView z{full.data(), 1, items, items};
        backend->gemm(false, edge.transposed, 1.0f, ConstMatrixView(h.data(), 1, hidden, hidden),
                      impl.matrix_of(edge), 0.0f, z);
        backend->bias_activation_forward(layer.activation, impl.params.layers[output].bias.data(),
                                         z);
        backend->top_k(z, nullptr, k, full_scores.data(), full_ids.data());
        for (uint32_t j = 0; j < k; ++j) {
            EXPECT_EQ(ids[j], full_ids[j]) << "query " << i << " rank " << j;
            EXPECT_EQ(scores[j], full_scores[j]) << "query " << i << " rank " << j;
        }
        if (k > 1 && scores[1] == 1.0f) ++stats.tied_at_one;
    }
    if (stats.ranked > 0) stats.candidates /= stats.ranked;
    return stats;
}

TEST_F(ScreenTest, TrainedModelRanksAsTheFullPathAndScreensMostItemsOut) {
    const std::string model = dir_.file("trained.nc");
    Network net = testing::trained_network(300, 32, 600, 4);
    net.save(model);
    expect_same_rankings(model, 400, 1);
    // The screen prunes: top-10 recomputes a small share of the 300 items.
    const ScreenStats stats = screen_against_full_product(model, 10, 200, 1.0f);
    EXPECT_EQ(stats.ranked, 200);
    EXPECT_LT(stats.candidates, 30.0) << "mean candidates of top-10 over 300 items";
}

TEST_F(ScreenTest, EveryMonotoneActivationRanksAsTheFullPath) {
    for (const char* activation :
         {"Sigmoid", "Tanh", "Linear", "RectifiedLinear", "LeakyRectifiedLinear",
          "ExponentialLinear", "ScaledExponentialLinear", "SoftPlus", "SoftSign"}) {
        SCOPED_TRACE(activation);
        const std::string model = save_network(testing::recommender_config(activation, 48), 500,
                                               dir_.file(std::string(activation) + ".nc"));
        expect_same_rankings(model, 120, 2);
    }
}

TEST_F(ScreenTest, SaturatedScoresKeepTheTieOrder) {
    // Weights large enough that many Sigmoid scores round to exactly 1.0f: the top-K is decided
    // by the lower-id rule among ties, which the screen must reproduce.
    const std::string model = save_network(testing::recommender_config("Sigmoid", 64), 400,
                                           dir_.file("saturated.nc"), 3000.0f);
    {
        Recommender r(model);
        RecommendOptions fifty;
        fifty.k = 50;
        const Recommendations top = r.recommend({1, 2, 3}, fifty);
        ASSERT_EQ(top.items.size(), 50u);
        EXPECT_EQ(top.items[49].score, 1.0f) << "the model does not saturate; make it steeper";
    }
    expect_same_rankings(model, 150, 3);
    // The screen itself ranks such ties (not only its fallback to the full path).
    const ScreenStats stats = screen_against_full_product(model, 20, 200, 0.02f);
    EXPECT_GT(stats.tied_at_one, 100) << "ranked " << stats.ranked;
}

TEST_F(ScreenTest, SharedTransposedWeightsRankAsTheFullPath) {
    const std::string model =
        save_network(testing::recommender_config("Sigmoid", 40, true), 350, dir_.file("tied.nc"));
    expect_same_rankings(model, 150, 4);
}

// A screened batch answers what single queries answer, bit for bit: groups of queries share one
// fp16 scan, each query's activations come from its own forward pass, and a query with too many
// candidates (k beyond the items) falls back to the full path inside the batch. 37 queries
// cross the group boundaries (16 per scan).
TEST_F(ScreenTest, BatchesRankExactlyAsSingleQueries) {
    const std::string model =
        save_network(testing::recommender_config("Sigmoid", 48), 400, dir_.file("batch.nc"));
    RecommenderOptions screened_options;
    screened_options.fp16_screening = true;
    const Recommender full(model);
    const Recommender screened(model, screened_options);
    ASSERT_TRUE(screened.screening());
    std::mt19937 rng(11);
    std::vector<Query> batch;
    for (int i = 0; i < 37; ++i) {
        Query q;
        q.items = testing::random_items(rng, 400, 30, /*weighted=*/i % 4 == 0);
        const uint32_t ks[] = {1, 10, 50, 405};
        q.options.k = ks[i % 4];
        if (i % 5 == 0)
            for (int d = 0; d < 30; ++d) q.options.deny.emplace_back(rng() % 400);
        batch.push_back(q);
    }
    const std::vector<Recommendations> got = screened.recommend_batch(batch);
    ASSERT_EQ(got.size(), batch.size());
    // The scan's threads (a team of two in chunks, or one) change nothing.
    RecommenderOptions two_threads = screened_options;
    two_threads.threads_per_call = 2;
    const Recommender teamed(model, two_threads);
    for (int threads : {0, 1, 2}) {
        const std::vector<Recommendations> again = teamed.recommend_batch(batch, threads);
        ASSERT_EQ(again.size(), got.size());
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(again[i].items.size(), got[i].items.size());
            for (size_t r = 0; r < got[i].items.size(); ++r) {
                EXPECT_EQ(again[i].items[r].id, got[i].items[r].id) << threads << " " << i;
                EXPECT_EQ(again[i].items[r].score, got[i].items[r].score) << threads << " " << i;
            }
        }
    }
    testing::expect_error([&] { teamed.recommend_batch(batch, -1); }, ErrorCategory::kUsage);
    for (size_t i = 0; i < batch.size(); ++i) {
        const Recommendations want = full.recommend(batch[i].items, batch[i].options);
        const Recommendations alone = screened.recommend(batch[i].items, batch[i].options);
        ASSERT_EQ(got[i].items.size(), want.items.size()) << "query " << i;
        ASSERT_EQ(alone.items.size(), want.items.size()) << "query " << i;
        for (size_t r = 0; r < want.items.size(); ++r) {
            EXPECT_EQ(got[i].items[r].id, want.items[r].id) << "query " << i << " rank " << r;
            EXPECT_EQ(got[i].items[r].score, want.items[r].score) << "query " << i << " rank " << r;
            EXPECT_EQ(alone.items[r].id, want.items[r].id) << "query " << i << " rank " << r;
            EXPECT_EQ(alone.items[r].score, want.items[r].score) << "query " << i << " rank " << r;
        }
    }
}

// OutputScreen: a group's one scan ranks each of its queries as rank() ranks it alone.
TEST_F(ScreenTest, OneScanForAGroupRanksAsOneScanPerQuery) {
    const std::string model =
        save_network(testing::recommender_config("Tanh", 40), 333, dir_.file("group.nc"));
    NetworkOptions options;
    options.device = "cpu";
    Network net = Network::load(model, options);
    engine::OutputScreen screen(net, 2, 1);
    auto backend = make_backend("cpu", 1);
    const size_t width = screen.width(), rows = 9;
    const uint32_t k = 12;
    std::mt19937 rng(13);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> h(rows * width);
    for (float& v : h) v = std::tanh(normal(rng));
    const std::vector<uint32_t> excluded = {0, 5, 17, 200};
    engine::ScreenScratch group, alone;
    screen.approximate(h.data(), rows, group);
    for (size_t r = 0; r < rows; ++r) {
        std::vector<float> s1(k), s2(k);
        std::vector<uint32_t> i1(k), i2(k);
        const engine::ScreenResult a = screen.rank_approximated(
            *backend, h.data() + r * width, r, excluded, k, group, s1.data(), i1.data());
        const engine::ScreenResult b =
            screen.rank(*backend, h.data() + r * width, excluded, k, alone, s2.data(), i2.data());
        ASSERT_TRUE(a.ranked && b.ranked) << "row " << r;
        EXPECT_EQ(s1, s2) << "row " << r;
        EXPECT_EQ(i1, i2) << "row " << r;
    }
}

TEST_F(ScreenTest, RefusalsNameTheReason) {
    RecommenderOptions o;
    o.fp16_screening = true;
    const std::string softmax =
        save_network(testing::recommender_config("SoftMax", 16), 50, dir_.file("softmax.nc"));
    // SoftMax is screened by its logits (recommender_softmax_test.cpp): accepted since issue 65.
    EXPECT_NO_THROW(Recommender(softmax, o));
    // An output layer fed by the Input layer directly.
    const std::string direct = dir_.file("direct.nc");
    {
        NetworkOptions options;
        options.device = "cpu";
        Network net = Network::create(NetworkConfig::from_json(R"({
          "Version": 0.9, "Name": "direct", "Kind": "AutoEncoder", "ErrorFunction": "L2",
          "Layers": [
            {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
            {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
             "Activation": "Sigmoid"}]})"),
                                      {{"in", 50}, {"out", 50}}, options);
        net.save(direct);
    }
    EXPECT_TRUE(testing::contains(
        testing::expect_error([&] { Recommender r(direct, o); }, ErrorCategory::kUsage),
        "takes the Input layer directly"));
    // Weights fp16 cannot hold.
    const std::string huge = dir_.file("huge.nc");
    {
        NetworkOptions options;
        options.device = "cpu";
        Network net = Network::create(testing::recommender_config("Sigmoid", 8),
                                      {{"in", 20}, {"out", 20}}, options);
        std::vector<float> w = net.get_parameter("weight:Hidden->Output");
        w[3 * 20 + 7] = 1e6f;
        net.set_parameter("weight:Hidden->Output", w);
        net.save(huge);
    }
    EXPECT_TRUE(testing::contains(
        testing::expect_error([&] { Recommender r(huge, o); }, ErrorCategory::kUsage),
        "weight:Hidden->Output holds 1000000.000000 at (3, 7)"));
}

}  // namespace
}  // namespace sparsenet
