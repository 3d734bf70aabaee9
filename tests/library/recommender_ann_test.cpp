// ANN index (sparsenet/ann_index.h, RecommenderOptions::ann_index): an exhaustive (flat) index
// answers exactly what the model answers without one; approximate answers keep the allow, deny
// and exclusion lists and score their items exactly; an index built from another model, a
// stale one, a file that is no ANN index or a truncated one are refused naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "library/ann_test_util.h"
#include "library/library_test_util.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::recommender_config;
using testing::ann::expect_same;
using testing::ann::random_options;
using testing::ann::save_network;
using testing::ann::with_ann;

using AnnIndexTest = testing::ann::Fixture;

TEST_F(AnnIndexTest, FlatIndexAnswersExactlyTheExactAnswer) {
    for (const auto& [activation, tied] : std::vector<std::pair<std::string, bool>>{
             {"Sigmoid", false}, {"Linear", false}, {"Relu", true}}) {
        SCOPED_TRACE(activation + (tied ? " tied" : ""));
        const uint32_t items = 700;
        const std::string model = save_network(recommender_config(activation, 24, tied), items,
                                               dir.file(activation + ".nc"));
        AnnIndexOptions build;
        build.kind = "flat";
        build.vectors = "fp32";  // the model's own bits (16-bit ones: recommender_ann16_test)
        const AnnIndexReport report = build_ann_index(model, dir.file(activation + ".ann"), build);
        EXPECT_EQ(report.vectors, "fp32");
        EXPECT_EQ(report.items, items);
        EXPECT_EQ(report.width, 24u);
        // flat stores the header only: its vectors are the model's, rebuilt when loading.
        EXPECT_LT(report.file_bytes, 4096u);
        EXPECT_EQ(report.index_bytes, uint64_t(items) * 32 * 4);  // 24 + 2 padded to 16s
        const Recommender exact(model);
        const Recommender ann(model, with_ann(dir.file(activation + ".ann")));
        ASSERT_TRUE(ann.ann());
        ASSERT_FALSE(exact.ann());
        testing::ann::expect_same_answers(ann, exact, items, 150, 30, 11);
        EXPECT_EQ(ann.ann_queries(), 300u);
        EXPECT_GT(ann.ann_memory_bytes(), 0u);
    }
}

// A small graph searched with a short candidate list, or cells of which a query scans one:
// approximate candidates, but every answer keeps the filters, has min(k, allowed items)
// results, and scores each of them exactly.
TEST_F(AnnIndexTest, ApproximateAnswersKeepTheFilters) {
    const uint32_t items = 2000;
    const std::string model =
        save_network(recommender_config("Sigmoid", 16), items, dir.file("m.nc"));
    for (const uint32_t m : {4u, 12u, 0u}) {
        const std::string kind = m ? "hnsw" + std::to_string(m) : "ivf";
        SCOPED_TRACE(kind);
        AnnIndexOptions build;
        build.kind = m ? "hnsw" : "ivf";
        build.vectors = "fp32";  // scores compared with the FP32 model's
        build.hnsw_m = m;
        build.ef_construction = 20;
        build.cells = 64;
        build.probe = m ? 2 : 1;
        const AnnIndexReport report = build_ann_index(model, dir.file(kind + ".ann"), build);
        EXPECT_EQ(report.kind, build.kind);
        EXPECT_EQ(report.links, m ? m : 0u);
        EXPECT_EQ(report.cells, m ? 0u : 64u);
        EXPECT_EQ(report.probe, build.probe);
        const Recommender exact(model);
        // efSearch 2: the candidate list is the over-fetch alone, from a sparse graph; one cell
        // of 64 (more when it holds fewer items than the query fetches).
        const Recommender ann(model, with_ann(dir.file(kind + ".ann"), build.probe));
        std::mt19937 rng(5);
        double overlap = 0.0;
        for (uint32_t i = 0; i < 100; ++i) {
            const std::vector<ItemRef> q = testing::random_items(rng, items, 30, false);
            const RecommendOptions o = random_options(rng, items, i);
            RecommendOptions all = o;
            all.k = items;  // every allowed item, with its exact score
            const Recommendations full = exact.recommend(q, all);
            std::map<uint32_t, float> allowed;
            for (const Recommendation& r : full.items) allowed[r.id] = r.score;
            const Recommendations got = ann.recommend(q, o);
            ASSERT_EQ(got.items.size(), std::min<size_t>(o.k, allowed.size())) << "query " << i;
            std::set<uint32_t> seen;
            for (const Recommendation& r : got.items) {
                auto it = allowed.find(r.id);
                ASSERT_NE(it, allowed.end()) << "query " << i << ": item " << r.id
                                             << " is excluded, denied or outside the allow list";
                EXPECT_EQ(r.score, it->second) << "query " << i << " item " << r.id;
                EXPECT_TRUE(seen.insert(r.id).second) << "query " << i << ": " << r.id << " twice";
            }
            for (size_t r = 1; r < got.items.size(); ++r)
                ASSERT_GE(got.items[r - 1].score, got.items[r].score) << "query " << i;
            const Recommendations want = exact.recommend(q, o);
            // k beyond the items: the index cannot fill it; the fallback ranks every item.
            if (o.k > items) expect_same(got, want, i);
            size_t common = 0;
            for (const Recommendation& r : want.items)
                common += allowed.count(r.id) && seen.count(r.id);
            overlap += want.items.empty() ? 1.0 : double(common) / double(want.items.size());
        }
        // Not a quality bar, a sign that the candidates come from the right neighbourhood.
        EXPECT_GT(overlap / 100, 0.3);
    }
}

// Concurrent calls share one index: each answer is the one the query gets alone.
TEST_F(AnnIndexTest, ConcurrentQueriesAnswerAsQueriesAlone) {
    const uint32_t items = 3000;
    const std::string model =
        save_network(recommender_config("Sigmoid", 16), items, dir.file("c.nc"));
    AnnIndexOptions build;
    build.probe = 40;
    build_ann_index(model, dir.file("c.ann"), build);
    RecommenderOptions o = with_ann(dir.file("c.ann"));
    o.max_concurrent_calls = 4;
    const Recommender ann(model, o);
    std::mt19937 rng(9);
    std::vector<std::vector<ItemRef>> queries;
    std::vector<Recommendations> alone;
    for (int i = 0; i < 64; ++i) {
        queries.push_back(testing::random_items(rng, items, 20, false));
        RecommendOptions ro;
        ro.k = 30;
        alone.push_back(ann.recommend(queries.back(), ro));
    }
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < 5; ++round) {
                for (size_t i = size_t(t); i < queries.size(); i += 2) {
                    RecommendOptions ro;
                    ro.k = 30;
                    const Recommendations r = ann.recommend(queries[i], ro);
                    bool same = r.items.size() == alone[i].items.size();
                    for (size_t j = 0; same && j < r.items.size(); ++j)
                        same = r.items[j].id == alone[i].items[j].id &&
                               r.items[j].score == alone[i].items[j].score;
                    mismatches[size_t(t)] += !same;
                }
            }
        });
    }
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
    EXPECT_EQ(ann.ann_queries(), 64u + 5 * (32 + 32 + 31 + 31));  // thread t: t, t + 2, ...
}

TEST_F(AnnIndexTest, AnIndexOfAnotherOrAStaleModelIsRefusedNamingTheFile) {
    const uint32_t items = 300;
    const std::string a =
        save_network(recommender_config("Sigmoid", 8), items, dir.file("a.nc"), 3);
    const std::string b =
        save_network(recommender_config("Sigmoid", 8), items, dir.file("b.nc"), 4);
    const std::string c =
        save_network(recommender_config("Sigmoid", 8), items + 1, dir.file("c.nc"), 3);
    AnnIndexOptions build;
    build.kind = "flat";
    const std::string index = dir.file("a.ann");
    build_ann_index(a, index, build);
    for (const std::string& other : {b, c}) {
        try {
            Recommender r(other, with_ann(index));
            FAIL() << "expected the index of a.nc to be refused for " << other;
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kData);
            const std::string m = e.what();
            EXPECT_NE(m.find(index), std::string::npos) << m;
            EXPECT_NE(m.find("built from another model"), std::string::npos) << m;
            EXPECT_NE(m.find("sparsenet ann-index -n " + other), std::string::npos) << m;
        }
    }
    // Stale: the same model file, one weight changed since the index was built.
    {
        NetworkOptions options;
        options.device = "cpu";
        Network net = Network::load(a, options);
        std::vector<float> w = net.get_parameter("weight:Hidden->Output");
        w[17] += 0.001f;
        net.set_parameter("weight:Hidden->Output", w);
        net.save(a);
    }
    try {
        Recommender r(a, with_ann(index));
        FAIL() << "expected a stale index to be refused";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kData);
        EXPECT_NE(std::string(e.what()).find(index), std::string::npos) << e.what();
    }
    // Not an ANN index, a truncated one, a missing one: kIo naming the file.
    build_ann_index(b, dir.file("b.ann"), build);
    const std::string bytes = testing::read_file(dir.file("b.ann"));
    testing::write_file(dir.file("cut.ann"), bytes.substr(0, bytes.size() / 2));
    testing::write_file(dir.file("text.ann"), "label\t0\nother\t1\n");
    for (const std::string& bad : {dir.file("cut.ann"), dir.file("text.ann"), dir.file("no.ann")}) {
        try {
            Recommender r(b, with_ann(bad));
            FAIL() << "expected " << bad << " to be refused";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kIo) << e.what();
            EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
        }
    }
    EXPECT_NO_THROW(Recommender(b, with_ann(dir.file("b.ann"))));
}

TEST_F(AnnIndexTest, BuildRefusesBadOptionsAndLayersThatAreNoInnerProducts) {
    const std::string soft =
        save_network(recommender_config("SoftMax", 8), 100, dir.file("soft.nc"));
    const std::string ok = save_network(recommender_config("Sigmoid", 8), 100, dir.file("ok.nc"));
    auto refused = [&](const std::string& model, const AnnIndexOptions& o, ErrorCategory cat,
                       const std::string& fragment) {
        try {
            build_ann_index(model, dir.file("x.ann"), o);
            ADD_FAILURE() << "expected a refusal mentioning " << fragment;
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), cat) << e.what();
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    };
    // SoftMax ranks by its logits (recommender_softmax_test.cpp): accepted since issue 65.
    EXPECT_NO_THROW(build_ann_index(soft, dir.file("soft.ann"), AnnIndexOptions{}));
    AnnIndexOptions kind;
    kind.kind = "lsh";
    refused(ok, kind, ErrorCategory::kUsage, "--kind 'lsh'");
    AnnIndexOptions links;
    links.kind = "hnsw";
    links.hnsw_m = 1;
    refused(ok, links, ErrorCategory::kUsage, "--hnsw-m 1");
    AnnIndexOptions cells;  // kind ivf, the default
    cells.cells = 101;
    refused(ok, cells, ErrorCategory::kUsage, "--cells 101: expected at most the 100 items");
    AnnIndexOptions probe;
    probe.cells = 8;
    probe.probe = 9;
    refused(ok, probe, ErrorCategory::kUsage, "--probe 9: expected at most the 8 cells");
    AnnIndexOptions layer;
    layer.output_layer = "Nope";
    refused(ok, layer, ErrorCategory::kUsage, "'Nope'");
    try {
        build_ann_index(ok, dir.file("no/such/dir/x.ann"), {});
        ADD_FAILURE() << "expected an unwritable path to be refused";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kIo);
        EXPECT_NE(std::string(e.what()).find("no/such/dir/x.ann"), std::string::npos);
    }
}

}  // namespace
}  // namespace sparsenet
