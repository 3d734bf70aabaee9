// The ANN index's search alone, one query at a time on one thread: the project's ivf index
// (any number of .ann files of one model) and, when the build found Debian's libfaiss-dev,
// faiss's IndexIVFFlat with inner product over the same vectors [w_j, b_j], at the same cells and
// probes. Recall@k against the exact answers the caller gives. bench.py --peers runs it
// (docs/benchmarks-ann.md, "ANN index against faiss and hnswlib").
//
// What is timed: AnnIndex::search (the centroids ranked, the probed cells scanned, the best
// `fetch` kept) and faiss's IndexIVFFlat::search for one query; neither the forward pass that
// gives h, nor the exact re-ranking the Recommender does after the search. Each fetches k plus
// the query's own items, which are then dropped (as the Recommender excludes them).
//
// Inputs (bench.py writes them):
//   --h F        the queries' source activations h, FP32 [queries, width], raw
//   --items F    text, one line per query: its own items (excluded), space-separated
//   --exact F    text, one line per query: the exact top-k, best first
// Output: JSON on stdout.
//
//   sparsenet_bench_ann_search --model M.nc --index A.ann [--index B.ann ...] --h H --items I
//       --exact E [--probes 8,16,32] [--k 100] [--faiss-cells N] [--threads 2]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/ann_index.h"
#include "engine/network_scoring.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"

#if defined(SPARSENET_BENCH_FAISS)
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/index_io.h>
#endif

namespace {

using namespace sparsenet;
using Clock = std::chrono::steady_clock;

std::vector<std::vector<int64_t>> read_lists(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(ErrorCategory::kIo, path + ": cannot open");
    std::vector<std::vector<int64_t>> lists;
    for (std::string line; std::getline(in, line);) {
        std::istringstream s(line);
        lists.emplace_back();
        for (int64_t v; s >> v;) lists.back().push_back(v);
    }
    return lists;
}

struct Point {
    uint32_t probe = 0;
    double recall = 0, p50_ms = 0, p99_ms = 0, qps = 0;
};

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    const double at = p / 100.0 * double(v.size() - 1);
    const size_t lo = size_t(at);
    const size_t hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

// search(query i, fetch, ids) over every query: recall@k after dropping the query's own items,
// and the latencies of the searches alone.
template <typename Search>
Point measure(uint32_t probe, size_t queries, size_t k,
              const std::vector<std::vector<int64_t>>& items,
              const std::vector<std::vector<int64_t>>& exact, Search&& search) {
    std::vector<double> lat(queries);
    std::vector<int64_t> ids;
    double found = 0.0;
    for (size_t i = 0; i < queries; ++i) {
        const auto t = Clock::now();
        search(i, k + items[i].size(), ids);
        lat[i] = std::chrono::duration<double>(Clock::now() - t).count();
        const std::set<int64_t> own(items[i].begin(), items[i].end());
        const std::set<int64_t> truth(exact[i].begin(), exact[i].end());
        size_t kept = 0, hits = 0;
        for (int64_t id : ids) {
            if (id < 0 || own.count(id)) continue;
            if (kept++ == k) break;
            hits += truth.count(id);
        }
        found += truth.empty() ? 0.0 : double(hits) / double(truth.size());
    }
    Point p;
    p.probe = probe;
    p.recall = found / double(queries);
    p.p50_ms = percentile(lat, 50) * 1e3;
    p.p99_ms = percentile(lat, 99) * 1e3;
    double total = 0;
    for (double l : lat) total += l;
    p.qps = double(queries) / total;
    return p;
}

std::string curve_json(const std::vector<Point>& curve) {
    std::ostringstream o;
    o << "[";
    for (size_t i = 0; i < curve.size(); ++i) {
        const Point& p = curve[i];
        char line[256];
        std::snprintf(line, sizeof line,
                      "%s\n   {\"probe\": %u, \"recall_at_100\": %.6f, \"p50_ms\": %.4f, "
                      "\"p99_ms\": %.4f, \"queries_per_s\": %.1f}",
                      i ? "," : "", p.probe, p.recall, p.p50_ms, p.p99_ms, p.qps);
        o << line;
    }
    o << "]";
    return o.str();
}

int run(int argc, char** argv) {
    std::string model, h_path, items_path, exact_path;
    std::vector<std::string> indexes;
    std::vector<uint32_t> probes{8, 16, 32, 64, 128, 256};
    size_t k = 100;
    uint32_t faiss_cells = 0;
    int threads = 2;
    for (int a = 1; a < argc; ++a) {
        const std::string flag = argv[a];
        if (a + 1 >= argc) throw Error(ErrorCategory::kUsage, flag + ": expected a value");
        const std::string v = argv[++a];
        if (flag == "--model") {
            model = v;
        } else if (flag == "--index") {
            indexes.push_back(v);
        } else if (flag == "--h") {
            h_path = v;
        } else if (flag == "--items") {
            items_path = v;
        } else if (flag == "--exact") {
            exact_path = v;
        } else if (flag == "--k") {
            k = std::stoul(v);
        } else if (flag == "--faiss-cells") {
            faiss_cells = uint32_t(std::stoul(v));
        } else if (flag == "--threads") {
            threads = std::stoi(v);
        } else if (flag == "--probes") {
            probes.clear();
            std::istringstream s(v);
            for (std::string p; std::getline(s, p, ',');) probes.push_back(uint32_t(std::stoul(p)));
        } else {
            throw Error(ErrorCategory::kUsage, "unknown flag " + flag);
        }
    }
    if (model.empty() || h_path.empty() || items_path.empty() || exact_path.empty()) {
        throw Error(ErrorCategory::kUsage, "expected --model, --h, --items and --exact");
    }
    NetworkOptions options;
    options.device = "cpu";
    options.threads = threads;
    const Network network = Network::load(model, options);
    const std::vector<engine::LayerView> layers = engine::layer_views(network);
    int output = -1;
    for (size_t l = 0; l < layers.size() && output < 0; ++l)
        if (layers[l].output && !layers[l].input) output = int(l);
    const engine::DenseOutputEdge edge = engine::dense_output_edge(network, output);
    const size_t width = edge.k, n = edge.n;

    const auto items = read_lists(items_path);
    const auto exact = read_lists(exact_path);
    std::ifstream hin(h_path, std::ios::binary);
    std::vector<float> h(items.size() * width);
    hin.read(reinterpret_cast<char*>(h.data()), std::streamsize(h.size() * sizeof(float)));
    if (!hin || exact.size() != items.size()) {
        throw Error(ErrorCategory::kData, h_path + ", " + items_path + ", " + exact_path +
                                              ": expected " + std::to_string(items.size()) +
                                              " queries of " + std::to_string(width) +
                                              " floats in each");
    }
    const size_t queries = items.size();

    std::cout << "{\"queries\": " << queries << ", \"k\": " << k << ", \"items\": " << n
              << ", \"width\": " << width << ",\n \"sparsenet\": {";
    omp_set_num_threads(1);
    for (size_t x = 0; x < indexes.size(); ++x) {
        engine::AnnIndex index(indexes[x], network, output, model);
        std::vector<Point> curve;
        std::vector<float> scratch;
        std::vector<int64_t> warm;
        index.set_probe(probes.front());  // one untimed pass: the pages touched once
        for (size_t i = 0; i < queries; ++i) index.search(h.data() + i * width, k, warm, scratch);
        for (uint32_t p : probes) {
            index.set_probe(p);
            curve.push_back(measure(p, queries, k, items, exact,
                                    [&](size_t i, size_t fetch, std::vector<int64_t>& ids) {
                                        index.search(h.data() + i * width, fetch, ids, scratch);
                                    }));
            std::cerr << indexes[x] << " probe " << p << ": recall " << curve.back().recall
                      << ", p50 " << curve.back().p50_ms << " ms\n";
        }
        std::cout << (x ? ",\n  " : "\n  ") << "\"" << indexes[x] << "\": {\"kind\": \""
                  << engine::to_string(index.kind()) << "\", \"vectors\": \""
                  << engine::to_string(index.vectors())
                  << "\", \"memory_bytes\": " << index.memory_bytes()
                  << ", \"curve\": " << curve_json(curve) << "}";
    }
    std::cout << "}";
#if defined(SPARSENET_BENCH_FAISS)
    if (faiss_cells > 0) {
        // [w_j, b_j] in item order, FP32: the model's own values.
        const size_t d = width + 1;
        std::vector<float> v(n * d);
        for (size_t j = 0; j < n; ++j) {
            for (size_t q = 0; q < width; ++q)
                v[j * d + q] =
                    edge.transposed ? edge.stored[j * edge.ld + q] : edge.stored[q * edge.ld + j];
            v[j * d + width] = edge.bias[j];
        }
        omp_set_num_threads(threads);
        const auto t = Clock::now();
        faiss::IndexFlatIP quantizer{faiss::Index::idx_t(d)};
        faiss::IndexIVFFlat ivf(&quantizer, d, faiss_cells, faiss::METRIC_INNER_PRODUCT);
        ivf.train(faiss::Index::idx_t(n), v.data());
        ivf.add(faiss::Index::idx_t(n), v.data());
        const double build_s = std::chrono::duration<double>(Clock::now() - t).count();
        omp_set_num_threads(1);
        std::vector<float> q(d), scores(k);
        std::vector<faiss::Index::idx_t> found(k);
        std::vector<Point> curve;
        ivf.nprobe = probes.front();  // one untimed pass, as for the project's indexes
        for (size_t i = 0; i < queries; ++i) {
            std::copy_n(h.data() + i * width, width, q.begin());
            q[width] = 1.0f;
            ivf.search(1, q.data(), faiss::Index::idx_t(k), scores.data(), found.data());
        }
        for (uint32_t p : probes) {
            if (p > faiss_cells) continue;
            ivf.nprobe = p;
            curve.push_back(measure(p, queries, k, items, exact,
                                    [&](size_t i, size_t fetch, std::vector<int64_t>& ids) {
                                        std::copy_n(h.data() + i * width, width, q.begin());
                                        q[width] = 1.0f;
                                        scores.resize(fetch);
                                        found.resize(fetch);
                                        ivf.search(1, q.data(), faiss::Index::idx_t(fetch),
                                                   scores.data(), found.data());
                                        ids.assign(found.begin(), found.end());
                                    }));
            std::cerr << "faiss probe " << p << ": recall " << curve.back().recall << ", p50 "
                      << curve.back().p50_ms << " ms\n";
        }
        std::cout << ",\n \"faiss\": {\"version\": \"" << FAISS_VERSION_MAJOR << "."
                  << FAISS_VERSION_MINOR << "." << FAISS_VERSION_PATCH
                  << "\", \"index\": \"IndexIVFFlat, IndexFlatIP quantizer, METRIC_INNER_PRODUCT\""
                  << ", \"cells\": " << faiss_cells << ", \"build_s\": " << build_s
                  << ", \"curve\": " << curve_json(curve) << "}";
    }
#else
    if (faiss_cells > 0)
        std::cerr << "this build has no faiss (libfaiss-dev): --faiss-cells ignored\n";
#endif
    std::cout << "}\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "sparsenet_bench_ann_search: " << e.what() << "\n";
        return 1;
    }
}
