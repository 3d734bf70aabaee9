// Serving latency of the library (google-benchmark): sparsenet::Recommender on a model of the
// ML-20M item count (27,278 items -> 600 hidden units -> 27,278 items, random weights: latency
// does not depend on what the weights learned), queries of 80 to 120 items with popularity skew,
// top-10 with the query's items excluded.
//
//   build/benchmarks/sparsenet_bench_library [--benchmark_filter=...]
//       [--benchmark_out=FILE --benchmark_out_format=json]
//
// Per benchmark: p50_ms and p99_ms of single calls (each measured alone, averaged over the
// service threads), and items_per_second = queries per second over all threads.
//   Recommend/threads_per_call:T/fp16_screening:S/threads:N
//                                            N service threads calling recommend() at once
//   RecommendBatch/batch:B/fp16_screening:S/threads_per_call:T
//                                            one thread calling recommend_batch() of B queries
//                                            (p50/p99 per call; items = queries). S = 0: one
//                                            product (OpenBLAS takes the cores); S = 1: groups of
//                                            16 queries per fp16 scan on T threads
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"

namespace sparsenet {
namespace {

constexpr uint32_t kItems = 27278, kHidden = 600, kQueries = 2048;

bool model_written = false;

// The model file, written once per process into the temp directory (main removes it), or at
// $SPARSENET_BENCH_MODEL (kept, and reused when it exists: benchmarks/serve/run.sh serves the
// same model over HTTP).
const std::string& model_path() {
    static const std::string path = [] {
        const char* keep = std::getenv("SPARSENET_BENCH_MODEL");
        if (keep != nullptr && *keep != '\0' && std::filesystem::exists(keep)) {
            return std::string(keep);
        }
        const std::string p =
            keep != nullptr && *keep != '\0'
                ? std::string(keep)
                : (std::filesystem::temp_directory_path() /
                   ("sparsenet-bench-library-" + std::to_string(getpid()) + ".nc"))
                      .string();
        const NetworkConfig config = NetworkConfig::from_json(R"({
          "Version": 0.9, "Name": "serving-benchmark", "Kind": "AutoEncoder",
          "ErrorFunction": "CrossEntropy",
          "Layers": [
            {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
            {"Name": "Hidden", "Kind": "Hidden", "N": 600, "Activation": "Sigmoid"},
            {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
             "Activation": "Sigmoid"}
          ]})");
        Network::create(config, {{"in", kItems}, {"out", kItems}}).save(p);
        model_written = keep == nullptr || *keep == '\0';
        return p;
    }();
    return path;
}

// One Recommender per (threads_per_call 1 or 2, fp16_screening off or on), built by the first
// thread that asks (static locals: the service threads of a run may all ask at once).
const Recommender& recommender(int threads_per_call, bool screening = false) {
    auto make = [](int t, bool s) {
        RecommenderOptions o;
        o.threads_per_call = t;
        o.max_batch = 256;
        o.fp16_screening = s;
        return Recommender(model_path(), o);
    };
    if (threads_per_call == 1) {
        if (screening) {
            static const Recommender one_screened = make(1, true);
            return one_screened;
        }
        static const Recommender one = make(1, false);
        return one;
    }
    if (screening) {
        static const Recommender two_screened = make(2, true);
        return two_screened;
    }
    static const Recommender two = make(2, false);
    return two;
}

// Queries of 80..120 distinct items, drawn with a Zipf-like popularity (rank^-1).
const std::vector<std::vector<ItemRef>>& queries() {
    static const std::vector<std::vector<ItemRef>> q = [] {
        std::mt19937_64 rng(2026);
        std::vector<double> weights(kItems);
        for (uint32_t i = 0; i < kItems; ++i) weights[i] = 1.0 / double(i + 1);
        std::discrete_distribution<uint32_t> popular(weights.begin(), weights.end());
        std::vector<std::vector<ItemRef>> all;
        for (uint32_t n = 0; n < kQueries; ++n) {
            const size_t length = 80 + rng() % 41;
            std::vector<uint32_t> ids;
            while (ids.size() < length) {
                ids.push_back(popular(rng));
                std::sort(ids.begin(), ids.end());
                ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
            }
            all.emplace_back(ids.begin(), ids.end());
        }
        return all;
    }();
    return q;
}

void report(benchmark::State& state, std::vector<double>& ms, double queries_per_iteration) {
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double p) { return ms.empty() ? 0.0 : ms[size_t(p * double(ms.size() - 1))]; };
    state.counters["p50_ms"] = benchmark::Counter(pct(0.50), benchmark::Counter::kAvgThreads);
    state.counters["p99_ms"] = benchmark::Counter(pct(0.99), benchmark::Counter::kAvgThreads);
    state.SetItemsProcessed(int64_t(double(state.iterations()) * queries_per_iteration));
}

void Recommend(benchmark::State& state) {
    const int threads_per_call = int(state.range(0));
    // Loaded before the timed loop, which every thread enters together.
    const Recommender& r = recommender(threads_per_call, state.range(1) != 0);
    const auto& qs = queries();
    RecommendOptions o;
    o.k = 10;
    size_t next = size_t(state.thread_index()) * 997;
    std::vector<double> ms;
    ms.reserve(1 << 16);
    for (auto _ : state) {
        const auto start = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(r.recommend(qs[next++ % qs.size()], o));
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
    }
    report(state, ms, 1.0);
}
// Threads(N) is N service threads; the single setup in thread 0 happens before any timing.
// fp16_screening: 0 = the full product, 1 = RecommenderOptions::fp16_screening.
BENCHMARK(Recommend)
    ->ArgNames({"threads_per_call", "fp16_screening"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->MinTime(3.0);
BENCHMARK(Recommend)
    ->ArgNames({"threads_per_call", "fp16_screening"})
    ->Args({2, 0})
    ->Args({2, 1})
    ->Threads(1)
    ->UseRealTime()
    ->MinTime(3.0);

void RecommendBatch(benchmark::State& state) {
    const size_t batch = size_t(state.range(0));
    const Recommender& r = recommender(int(state.range(2)), state.range(1) != 0);
    const auto& qs = queries();
    // Consecutive batches of the 2,048 queries in turn, as a service sees them: the same batch
    // every time would find its candidates' weights in the cache.
    std::vector<std::vector<Query>> work(std::max<size_t>(1, qs.size() / batch));
    for (size_t b = 0; b < work.size(); ++b) {
        for (size_t i = 0; i < batch; ++i) work[b].push_back({qs[(b * batch + i) % qs.size()], {}});
    }
    size_t next = 0;
    std::vector<double> ms;
    for (auto _ : state) {
        const std::vector<Query>& one = work[next++ % work.size()];
        const auto start = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(r.recommend_batch(one));
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
    }
    report(state, ms, double(batch));
}
BENCHMARK(RecommendBatch)
    ->ArgNames({"batch", "fp16_screening", "threads_per_call"})
    ->ArgsProduct({{4, 8, 16, 64, 256}, {0, 1}, {1}})
    ->ArgsProduct({{1, 4, 8, 16}, {1}, {2}})
    ->UseRealTime()
    ->MinTime(3.0);

}  // namespace
}  // namespace sparsenet

// OpenBLAS 0.3.21 reads OPENBLAS_CORETYPE when it loads and does not recognise recent AVX-512
// CPUs (docs/architecture.md): set it and re-execute once, as the sparsenet tool does. Only the
// batches reach OpenBLAS; single queries use the backend's own kernel.
int main(int argc, char** argv) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (std::getenv("OPENBLAS_CORETYPE") == nullptr && __builtin_cpu_supports("avx512f")) {
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        execv("/proc/self/exe", argv);
    }
#endif
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("model",
                                "27278 -> 600 (Sigmoid) -> 27278 (Sigmoid), random weights");
    benchmark::AddCustomContext("queries",
                                "80..120 items, Zipf popularity, k = 10, inputs excluded");
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    if (sparsenet::model_written) std::remove(sparsenet::model_path().c_str());
    return 0;
}
