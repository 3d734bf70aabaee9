// Many threads querying one Recommender get exactly the answers of sequential calls. Also run
// under ThreadSanitizer (`make test-tsan`, CMakePresets.json "tsan"): the model is untrained
// (no OpenMP team is ever started: libgomp is not instrumented and would give false reports)
// and the Recommender runs one thread per call.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "library/library_test_util.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

constexpr uint32_t kItems = 300;

struct Outcome {
    Recommendations result;
    std::string error;  // what() of the Error thrown, if any
};

Outcome run(const Recommender& r, const Query& q) {
    Outcome o;
    try {
        o.result = r.recommend(q.items, q.options);
    } catch (const Error& e) {
        o.error = e.what();
    }
    return o;
}

std::vector<Query> make_queries(uint32_t count) {
    std::mt19937 rng(19);
    std::vector<Query> queries;
    for (uint32_t i = 0; i < count; ++i) {
        Query q;
        q.items = testing::random_items(rng, kItems, 30, i % 2 == 0);
        q.options.k = 1 + rng() % 25;
        if (i % 5 == 1) q.options.deny = {int(rng() % kItems), "item-7"};
        if (i % 7 == 2) q.options.allow = {1, 4, 9, 16, 25, 36, 49, 64, 81, 100, 121, 144};
        if (i % 11 == 3) q.items.push_back("not-an-item");  // an error, every time
        if (i % 13 == 4) {
            q.items.push_back(int64_t(kItems) + 1);
            q.options.ignore_unknown = true;
        }
        queries.push_back(std::move(q));
    }
    return queries;
}

// screening: RecommenderOptions::fp16_screening (per-context screen buffers, shared copies).
void expect_threads_get_sequential_answers(bool screening) {
    testing::TempDir dir;
    testing::random_network(kItems, 48, 5).save(dir.file("model.nc"));
    write_index(dir.file("features.index"), testing::item_names(kItems));
    RecommenderOptions options;
    options.features_index = dir.file("features.index");
    options.threads_per_call = 1;
    options.max_concurrent_calls = 3;  // fewer than the threads below: callers also wait
    options.max_batch = 5;             // batches of 5 reach BLAS, smaller ones do not
    options.fp16_screening = screening;
    const Recommender r(dir.file("model.nc"), options);
    ASSERT_EQ(r.screening(), screening);

    const std::vector<Query> queries = make_queries(240);
    std::vector<Outcome> sequential;
    for (const Query& q : queries) sequential.push_back(run(r, q));
    int errors = 0;
    for (const Outcome& o : sequential) errors += o.error.empty() ? 0 : 1;
    ASSERT_GT(errors, 0);  // the error path is exercised too
    ASSERT_LT(errors, int(queries.size()));
    // Batches (1 to 7 queries, without the failing ones) answered sequentially.
    std::vector<std::vector<Query>> batches;
    std::vector<std::vector<Recommendations>> batch_answers;
    for (size_t first = 0, size = 1; first < queries.size(); first += size, size = size % 7 + 1) {
        std::vector<Query> batch;
        for (size_t i = first; i < std::min(queries.size(), first + size); ++i) {
            if (sequential[i].error.empty()) batch.push_back(queries[i]);
        }
        batch_answers.push_back(r.recommend_batch(batch));
        batches.push_back(std::move(batch));
    }

    constexpr int kThreads = 8;
    std::atomic<int> mismatches{0};
    std::vector<std::string> first_problem(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            // Each thread walks the queries in its own order; odd threads mix in batches.
            std::mt19937 rng(100 + t);
            std::vector<size_t> order(queries.size());
            for (size_t i = 0; i < order.size(); ++i) order[i] = i;
            std::shuffle(order.begin(), order.end(), rng);
            for (size_t n = 0; n < order.size(); ++n) {
                const size_t i = order[n];
                const Outcome got = run(r, queries[i]);
                std::string why;
                const bool same =
                    got.error == sequential[i].error &&
                    testing::same_recommendations(got.result, sequential[i].result, &why);
                if (!same) {
                    ++mismatches;
                    if (first_problem[t].empty())
                        first_problem[t] = "query " + std::to_string(i) + ": " + why + got.error;
                }
                if (t % 2 == 1 && n < batches.size()) {
                    const std::vector<Recommendations> b = r.recommend_batch(batches[n]);
                    for (size_t j = 0; j < b.size(); ++j) {
                        if (!testing::same_recommendations(b[j], batch_answers[n][j], &why)) {
                            ++mismatches;
                            if (first_problem[t].empty())
                                first_problem[t] = "batch " + std::to_string(n) + ": " + why;
                        }
                    }
                }
            }
        });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0);
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(first_problem[t], "") << "thread " << t;
}

TEST(RecommenderConcurrency, ThreadsGetTheAnswersOfSequentialCalls) {
    expect_threads_get_sequential_answers(false);
}

TEST(RecommenderConcurrency, ScreenedThreadsGetTheAnswersOfSequentialCalls) {
    expect_threads_get_sequential_answers(true);
}

// Several threads sharing one Recommender with two threads per call (an OpenMP team per calling
// thread): still the sequential answers. Not under ThreadSanitizer (libgomp).
TEST(RecommenderConcurrency, TwoThreadsPerCallGiveTheSameAnswers) {
    if (std::getenv("SPARSENET_UNDER_TSAN") != nullptr) GTEST_SKIP() << "OpenMP teams under TSan";
    testing::TempDir dir;
    testing::random_network(kItems, 48, 6).save(dir.file("model.nc"));
    RecommenderOptions one;
    const Recommender r1(dir.file("model.nc"), one);
    RecommenderOptions two;
    two.threads_per_call = 2;
    two.max_concurrent_calls = 2;
    const Recommender r2(dir.file("model.nc"), two);
    std::vector<Query> queries = make_queries(60);
    for (Query& q : queries) {  // ids only: this model has no features index
        q.items.erase(std::remove_if(q.items.begin(), q.items.end(),
                                     [](const ItemRef& x) { return x.by_name; }),
                      q.items.end());
        q.options.deny.clear();
        q.options.ignore_unknown = true;
    }
    std::vector<Recommendations> want;
    for (const Query& q : queries) want.push_back(r1.recommend(q.items, q.options));
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (size_t i = 0; i < queries.size(); ++i) {
                std::string why;
                if (!testing::same_recommendations(
                        r2.recommend(queries[i].items, queries[i].options), want[i], &why))
                    ++mismatches;
            }
        });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace sparsenet
