// Recommender: one loaded network shared read-only by every call; each call in flight borrows a
// Context (its own backend instance and activation buffers) from a pool, runs the engine's
// forward pass into it and ranks with the backend's top_k.
#include "sparsenet/recommender.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/ann_index.h"
#include "engine/device_dataset.h"
#include "engine/input_norm.h"
#include "engine/network_scoring.h"
#include "engine/output_screen.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/network.h"

namespace sparsenet {

namespace {

// What one call in flight writes. The backend is its own instance because the CPU backend's
// scratch (top_k candidates, ...) is per instance; the buffers only grow.
struct Context {
    std::unique_ptr<Backend> backend;
    std::vector<DeviceArray<float>> act;  // by layer index; empty for Input layers
    std::vector<float*> act_ptrs;
    size_t rows = 0;  // capacity of act, in batch rows
    DeviceArray<float> top_scores;
    DeviceArray<uint32_t> top_ids;
    size_t top_slots = 0;
    engine::ScreenScratch screen;
    std::vector<float> sources;  // screened groups: each query's source activations [rows, width]
    // ANN index queries
    engine::AnnRanker::Scratch rerank;
    std::vector<int64_t> ann_ids;
    std::vector<float> ann_scratch;
    std::vector<uint32_t> candidates;
};

// A query checked against the model: sorted unique input columns with their values, sorted
// unique output columns that must not be returned, k, and what was skipped.
struct Resolved {
    std::vector<uint32_t> ids;
    std::vector<float> values;
    std::vector<uint32_t> excluded;
    std::vector<uint32_t> allowed;  // sorted unique, when the query has an allow list
    bool has_allow = false;
    uint32_t k = 0;
    std::vector<std::string> unknown;
};

void sort_unique(std::vector<uint32_t>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

// "'a', 'b', 17 and 3 more" (at most `shown` entries).
std::string list_items(const std::vector<std::string>& items, size_t shown = 20) {
    std::string s;
    for (size_t i = 0; i < items.size() && i < shown; ++i) s += (i == 0 ? "" : ", ") + items[i];
    if (items.size() > shown) s += " and " + std::to_string(items.size() - shown) + " more";
    return s;
}

}  // namespace

struct Recommender::Impl {
    std::string model_path;
    RecommenderOptions options;
    Network network;
    std::vector<engine::LayerView> layers;  // the network's, in the config's order
    int input_layer = -1;
    int output_layer = -1;
    uint32_t input_n = 0;
    uint32_t output_n = 0;
    // Where the names come from: the features_index file, or "the feature names in <model>";
    // empty: items are ids only.
    std::string index_path;
    std::vector<std::string> names;      // of the input layer's units (query items)
    std::vector<std::string> out_names;  // of the ranked layer's units (results)
    std::unordered_map<std::string, uint32_t> ids;

    std::mutex mutex;
    std::condition_variable available;
    std::vector<std::unique_ptr<Context>> idle;
    int contexts = 0;  // created, idle or in use
    int max_contexts = 1;
    std::unique_ptr<engine::OutputScreen> screen;  // fp16_screening on the CPU
    // ANN index (options.ann_index): candidates, and their exact scores.
    std::unique_ptr<engine::AnnIndex> ann;
    std::unique_ptr<engine::AnnRanker> ranker;
    mutable std::atomic<uint64_t> ann_queries{0}, ann_fallbacks{0};
    // The network's output matrix, freed with an ANN index, and the FP32 input weights less
    // their BF16 copies (bf16_input_weights).
    size_t released_bytes = 0;
    // Screened queries per scan of the fp16 copy (rank_screened).
    static constexpr size_t kScreenGroup = 16;

    Impl(const std::string& path, const RecommenderOptions& opts)
        : model_path(path), options(opts), network(load(path, opts)) {
        layers = engine::layer_views(network);
        std::vector<std::string> inputs;
        for (size_t l = 0; l < layers.size(); ++l) {
            if (!layers[l].input) continue;
            inputs.push_back(layers[l].name);
            input_layer = static_cast<int>(l);
        }
        if (inputs.size() != 1) {
            throw Error(ErrorCategory::kNotImplemented,
                        path + ": not implemented yet: serving a network with " +
                            std::to_string(inputs.size()) +
                            " Input layers; the Recommender takes the items of one Input layer");
        }
        output_layer = find_output(layers, opts.output_layer);
        input_n = layers[input_layer].n;
        output_n = layers[output_layer].n;
        if (!opts.ann_index.empty()) {
            // Before the screen, which it replaces; the ANN index checks the layer itself.
            if (network.device() != "cpu") {
                throw Error(ErrorCategory::kUsage,
                            opts.ann_index +
                                ": ann_index: an ANN index serves from the CPU "
                                "backend; the model was loaded on '" +
                                network.device() + "' (expected device \"cpu\")");
            }
            ann = std::make_unique<engine::AnnIndex>(opts.ann_index, network, output_layer, path);
            ann->set_probe(opts.ann_probe);
            ranker = std::make_unique<engine::AnnRanker>(network, output_layer, ann.get());
            // The ranker holds the item vectors now; the full product never runs again.
            released_bytes = engine::release_output_matrix(network, output_layer);
        } else if (opts.fp16_screening) {
            const std::string why = engine::OutputScreen::unsupported(network, output_layer);
            if (!why.empty()) {
                throw Error(ErrorCategory::kUsage, path + ": fp16_screening: " + why +
                                                       " (expected an output layer with one "
                                                       "dense source and an element-wise "
                                                       "activation)");
            }
            if (network.device() == "cpu") {
                screen = std::make_unique<engine::OutputScreen>(network, output_layer,
                                                                opts.threads_per_call);
            }
        }
        if (opts.bf16_weights_only) {
            if (opts.fp16_screening) {
                throw Error(ErrorCategory::kUsage,
                            path +
                                ": bf16_weights_only and fp16_screening exclude each other "
                                "(the fp16 copy is made from the FP32 weights)");
            }
            network.keep_only_bf16_weights();
        }
        if (opts.bf16_input_weights) {
            const size_t freed = network.keep_bf16_input_weights();
            if (freed == 0) {
                throw Error(ErrorCategory::kUsage,
                            path +
                                ": bf16_input_weights: no weight matrix is read by sparse "
                                "inputs alone (an input layer's matrix that a GEMM also reads, "
                                "tied weights, stays FP32)");
            }
            released_bytes += freed;
        }
        if (!opts.features_index.empty()) {
            index_path = opts.features_index;
            names = read_index(index_path);
            if (names.size() > input_n) {
                throw Error(ErrorCategory::kData,
                            index_path + ": the features index has " +
                                std::to_string(names.size()) + " labels but input layer '" +
                                layers[input_layer].name + "' of " + path + " has " +
                                std::to_string(input_n) +
                                " units; expected the index the model was trained with");
            }
            out_names = names;
        } else if (!network.feature_names(layers[input_layer].name).empty()) {
            // The model carries the features indexes it was trained with.
            index_path = "the feature names in " + path;
            names = network.feature_names(layers[input_layer].name);
            out_names = network.feature_names(layers[output_layer].name);
            if (out_names.empty()) out_names = names;
        }
        ids.reserve(names.size());
        for (size_t i = 0; i < names.size(); ++i) ids.emplace(names[i], uint32_t(i));
        const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        max_contexts = opts.max_concurrent_calls > 0
                           ? opts.max_concurrent_calls
                           : std::max(1, hardware / opts.threads_per_call);
    }

    static Network load(const std::string& path, const RecommenderOptions& opts) {
        if (opts.threads_per_call < 1) {
            throw Error(ErrorCategory::kUsage, "threads_per_call must be >= 1, got " +
                                                   std::to_string(opts.threads_per_call));
        }
        if (opts.max_concurrent_calls < 0) {
            throw Error(ErrorCategory::kUsage,
                        "max_concurrent_calls must be >= 0 (0 = hardware threads), got " +
                            std::to_string(opts.max_concurrent_calls));
        }
        if (opts.max_batch == 0) throw Error(ErrorCategory::kUsage, "max_batch must be positive");
        NetworkOptions net_options;
        net_options.device = opts.device;
        net_options.threads = opts.threads_per_call;
        // One process serves the whole model; its contexts run forward passes concurrently,
        // which a network split across ranks cannot (its passes are collectives).
        net_options.comm = CommKind::kLocal;
        net_options.precision = opts.precision;
        net_options.switches = opts.switches;
        // What the Recommender keeps is read straight into its form: the BF16 input layer, and
        // with an ANN index no output matrix (the index holds the item vectors).
        net_options.load.bf16_input_weights = opts.bf16_input_weights;
        net_options.load.release_output =
            !opts.ann_index.empty() && engine::AnnIndex::holds_vectors(opts.ann_index);
        net_options.load.output_layer = opts.output_layer;
        // Blocks of 4 MB: the load's transient beside what it keeps (64 MB blocks were a third
        // of a 120,000 x 48 model's served memory).
        net_options.load.chunk_floats = size_t(1) << 20;
        return Network::load(path, net_options);
    }

    // As Predictor: a layer by name (not an Input layer), or the first Output layer.
    static int find_output(const std::vector<engine::LayerView>& layers, const std::string& name) {
        for (size_t l = 0; l < layers.size(); ++l) {
            const engine::LayerView& layer = layers[l];
            if (name.empty() ? !layer.output : layer.name != name) continue;
            if (layer.input) {
                throw Error(ErrorCategory::kUsage, "output_layer '" + name +
                                                       "' is an Input layer; expected a layer "
                                                       "whose activations rank the items");
            }
            return static_cast<int>(l);
        }
        throw Error(ErrorCategory::kUsage, name.empty()
                                               ? "the network has no Output layer"
                                               : "the network has no layer '" + name + "'");
    }

    // ---- queries ----

    // The id of `item` if it is known and below `limit`; otherwise records it in *unknown.
    bool resolve(const ItemRef& item, uint32_t limit, uint32_t* id,
                 std::vector<std::string>* unknown) const {
        if (item.by_name) {
            if (index_path.empty()) {
                throw Error(ErrorCategory::kUsage,
                            "item '" + item.name + "' is given by name, but " + model_path +
                                " has no feature names (it was trained on datasets converted "
                                "without index files) and no RecommenderOptions::features_index "
                                "was given; give ids, or the features index");
            }
            auto it = ids.find(item.name);
            if (it != ids.end() && it->second < limit) {
                *id = it->second;
                return true;
            }
            unknown->push_back("'" + item.name + "'");
            return false;
        }
        if (item.id >= 0 && item.id < int64_t(limit)) {
            *id = uint32_t(item.id);
            return true;
        }
        unknown->push_back(std::to_string(item.id));
        return false;
    }

    Resolved resolve(const std::vector<ItemRef>& items, const RecommendOptions& opts) const {
        if (opts.k == 0) throw Error(ErrorCategory::kUsage, "k must be positive");
        Resolved q;
        q.k = std::min(opts.k, output_n);
        std::vector<std::string> bad_items, bad_allow, bad_deny;
        std::vector<std::pair<uint32_t, float>> given;
        given.reserve(items.size());
        uint32_t id = 0;
        for (const ItemRef& item : items) {
            if (!resolve(item, input_n, &id, &bad_items)) continue;
            if (!std::isfinite(item.weight)) {
                throw Error(ErrorCategory::kUsage,
                            "item " + (item.by_name ? "'" + item.name + "'" : std::to_string(id)) +
                                " has weight " + std::to_string(item.weight) +
                                "; expected a finite number");
            }
            given.emplace_back(id, item.weight);
        }
        // Duplicates count once, with their largest weight: repeated views of an item stay an
        // indicator, and the result does not depend on the order of the list.
        std::sort(given.begin(), given.end());
        for (const auto& [item_id, weight] : given) {
            if (!q.ids.empty() && q.ids.back() == item_id) {
                q.values.back() = std::max(q.values.back(), weight);
            } else {
                q.ids.push_back(item_id);
                q.values.push_back(weight);
            }
        }
        if (opts.exclude_inputs) {
            for (uint32_t i : q.ids)
                if (i < output_n) q.excluded.push_back(i);
        }
        for (const ItemRef& item : opts.deny) {
            if (resolve(item, output_n, &id, &bad_deny)) q.excluded.push_back(id);
        }
        if (!opts.allow.empty()) {
            std::vector<uint32_t> allowed;
            for (const ItemRef& item : opts.allow) {
                if (resolve(item, output_n, &id, &bad_allow)) allowed.push_back(id);
            }
            sort_unique(allowed);
            q.allowed = allowed;
            q.has_allow = true;
            // top_k only excludes, so an allow list becomes the exclusion of everything else.
            size_t a = 0;
            for (uint32_t c = 0; c < output_n; ++c) {
                if (a < allowed.size() && allowed[a] == c) {
                    ++a;
                } else {
                    q.excluded.push_back(c);
                }
            }
        }
        sort_unique(q.excluded);
        if (bad_items.empty() && bad_allow.empty() && bad_deny.empty()) return q;
        if (opts.ignore_unknown) {
            for (auto* list : {&bad_items, &bad_allow, &bad_deny}) {
                for (std::string& s : *list) {
                    // Recorded as given: a name without the quotes of the message.
                    if (s.size() >= 2 && s.front() == '\'') s = s.substr(1, s.size() - 2);
                    q.unknown.push_back(std::move(s));
                }
            }
            return q;
        }
        std::string message;
        auto describe = [&](const std::vector<std::string>& bad, const char* where) {
            if (bad.empty()) return;
            message += (message.empty() ? "" : "; ") + std::to_string(bad.size()) + " unknown " +
                       (bad.size() == 1 ? "item" : "items") + " in " + where + ": " +
                       list_items(bad);
        };
        describe(bad_items, "the query");
        describe(bad_allow, "the allow list");
        describe(bad_deny, "the deny list");
        message += " (expected";
        if (!index_path.empty()) message += " labels of " + index_path + " or";
        message += " ids 0.." + std::to_string(input_n - 1) + " for query items, 0.." +
                   std::to_string(output_n - 1) +
                   " for allow/deny; set ignore_unknown to skip unknown items)";
        throw Error(ErrorCategory::kData, model_path + ": " + message);
    }

    // ---- contexts ----

    class Lease {
      public:
        explicit Lease(Impl& impl) : impl_(impl), context_(impl.acquire()) {}
        ~Lease() { impl_.release(std::move(context_)); }
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        Context& operator*() { return *context_; }

      private:
        Impl& impl_;
        std::unique_ptr<Context> context_;
    };

    std::unique_ptr<Context> acquire() {
        std::unique_lock<std::mutex> lock(mutex);
        available.wait(lock, [&] { return !idle.empty() || contexts < max_contexts; });
        if (!idle.empty()) {
            std::unique_ptr<Context> c = std::move(idle.back());
            idle.pop_back();
            return c;
        }
        ++contexts;
        lock.unlock();
        try {
            auto c = std::make_unique<Context>();
            // The device the network resolved to ("auto" once resolved), so that contexts
            // and weights share it.
            c->backend = make_backend(network.device(), options.threads_per_call);
            c->backend->set_precision(network.precision());  // the network's GEMM arithmetic
            c->act.resize(layers.size());
            c->act_ptrs.assign(c->act.size(), nullptr);
            return c;
        } catch (...) {
            lock.lock();
            --contexts;
            available.notify_one();
            throw;
        }
    }

    void release(std::unique_ptr<Context> c) {
        {
            std::lock_guard<std::mutex> lock(mutex);
            idle.push_back(std::move(c));
        }
        available.notify_one();
    }

    void ensure_capacity(Context& c, size_t rows, size_t slots) const {
        if (rows > c.rows) {
            for (size_t l = 0; l < layers.size(); ++l) {
                // With an ANN index the output layer is never computed (skip_layer): no buffer
                // (at 10,000,000 items, 40 MB a context).
                if (layers[l].input || (ann && int(l) == output_layer)) continue;
                c.act[l] = DeviceArray<float>(*c.backend, rows * layers[l].ld, "activations");
                // Zeros in the padding (forward_into's contract: its GEMMs may run over it).
                if (layers[l].ld != layers[l].n)
                    c.backend->fill(c.act[l].data(), rows * layers[l].ld, 0.0f);
                c.act_ptrs[l] = c.act[l].data();
            }
            c.rows = rows;
        }
        if (slots > c.top_slots) {
            c.top_scores = DeviceArray<float>(*c.backend, slots, "top-K scores");
            c.top_ids = DeviceArray<uint32_t>(*c.backend, slots, "top-K ids");
            c.top_slots = slots;
        }
    }

    // Forward pass and top-K of queries [first, first + count) into out[first ...].
    // threads: of the fp16 scans (0: threads_per_call).
    void rank(Context& c, const std::vector<Resolved>& queries, size_t first, size_t count,
              std::vector<Recommendations>& out, int threads = 0) const {
        Dataset input;
        input.name = layers[input_layer].dataset;
        input.rows = count;
        input.cols = input_n;
        Dataset exclude;
        exclude.name = "excluded items";
        exclude.rows = count;
        exclude.cols = output_n;
        uint32_t k = 1;
        for (size_t i = first; i < first + count; ++i) {
            const Resolved& q = queries[i];
            // Values always (1 for unweighted items): x.value(e) is 1 for boolean data too, so
            // the product is the same and queries of both kinds share one batch.
            input.indices.insert(input.indices.end(), q.ids.begin(), q.ids.end());
            input.values.insert(input.values.end(), q.values.begin(), q.values.end());
            input.offsets.push_back(input.indices.size());
            exclude.indices.insert(exclude.indices.end(), q.excluded.begin(), q.excluded.end());
            exclude.offsets.push_back(exclude.indices.size());
            k = std::max(k, q.k);
        }
        if (const float norm = layers[input_layer].normalize_l2; norm > 0.0f) {
            engine::normalize_rows(input, engine::row_square_sums(input), norm);
        }
        // Screened or from an ANN index, the passes run one query at a time.
        const bool single = screen || ann;
        ensure_capacity(c, single ? 1 : count, single ? k : count * k);
        const engine::DeviceDataset input_data(*c.backend, input);
        const engine::DeviceDataset excluded(*c.backend, exclude);
        engine::Bindings bindings;
        bindings.layer_data.assign(layers.size(), nullptr);
        bindings.layer_data[input_layer] = &input_data;
        const BatchRows rows{nullptr, 0, count};
        std::vector<float> scores(count * k);
        std::vector<uint32_t> top(count * k);
        // By row: scored by logits (a SoftMax layer ranked by the index or the screen).
        std::vector<char> logits(count, 0);
        if (ann) {
            rank_ann(c, queries, first, count, bindings, k, scores, top);
            logits.assign(count, ranker->logits());
        } else if (screen) {
            rank_screened(c, queries, first, count, bindings, excluded, k, scores, top, logits,
                          threads);
        } else {
            engine::forward_into(network, *c.backend, c.act_ptrs, bindings, rows);
            full_top_k(c, excluded, rows, k, scores.data(), top.data());
        }
        for (size_t r = 0; r < count; ++r) {
            const Resolved& q = queries[first + r];
            Recommendations& result = out[first + r];
            result.unknown = q.unknown;
            result.logits = logits[r] != 0;
            for (size_t i = 0; i < q.k; ++i) {
                const uint32_t id = top[r * k + i];
                if (id == UINT32_MAX) break;  // fewer items left than k
                result.items.push_back({name(id), id, scores[r * k + i]});
            }
        }
    }

    // The output layer's top k of the forward pass just run over `rows`, as [rows.batch, k].
    void full_top_k(Context& c, const engine::DeviceDataset& excluded, const BatchRows& rows,
                    uint32_t k, float* scores, uint32_t* top) const {
        const CsrBatchView ex = excluded.view(rows);
        c.backend->top_k(ConstMatrixView(c.act[output_layer].data(), rows.batch, output_n,
                                         layers[output_layer].ld),
                         &ex, k, c.top_scores.data(), c.top_ids.data());
        c.top_scores.download(scores, rows.batch * k);
        c.top_ids.download(top, rows.batch * k);
    }

    // fp16 screening of `count` queries, groups of kScreenGroup sharing one scan of the fp16
    // copy. Each query's source activations come from its own one-row forward pass, the same
    // bits as recommend() of that query alone, and the screen ranks each query exactly as the
    // full product would: a batch answers exactly what single queries do. A query with too many
    // candidates for the screen (rare) takes the full path alone. logits[row]: the screen ranked
    // the row of a SoftMax layer (by logits; the full path gives probabilities).
    void rank_screened(Context& c, const std::vector<Resolved>& queries, size_t first, size_t count,
                       const engine::Bindings& bindings, const engine::DeviceDataset& excluded,
                       uint32_t k, std::vector<float>& scores, std::vector<uint32_t>& top,
                       std::vector<char>& logits, int threads) const {
        const size_t width = screen->width();
        for (size_t g = 0; g < count; g += kScreenGroup) {
            const size_t group = std::min(kScreenGroup, count - g);
            c.sources.resize(group * width);
            for (size_t r = 0; r < group; ++r) {
                const BatchRows one{nullptr, g + r, 1};
                engine::forward_into(network, *c.backend, c.act_ptrs, bindings, one, output_layer);
                std::copy_n(c.act[screen->source()].data(), width, c.sources.data() + r * width);
            }
            screen->approximate(c.sources.data(), group, c.screen, threads);
            for (size_t r = 0; r < group; ++r) {
                const size_t row = g + r;
                const Resolved& q = queries[first + row];
                const bool ranked =
                    screen
                        ->rank_approximated(*c.backend, c.sources.data() + r * width, r, q.excluded,
                                            k, c.screen, scores.data() + row * k,
                                            top.data() + row * k)
                        .ranked;
                if (ranked) {
                    logits[row] = screen->logits();
                    continue;
                }
                const BatchRows one{nullptr, row, 1};
                engine::forward_into(network, *c.backend, c.act_ptrs, bindings, one);
                full_top_k(c, excluded, one, k, scores.data() + row * k, top.data() + row * k);
            }
        }
    }

    // From the ANN index: per query, a one-row forward pass up to the output layer, candidates
    // from the index (over-fetched; more when the filters leave fewer than k), ranked exactly by
    // AnnRanker. A query the index cannot fill is ranked by AnnRanker over every item (the full
    // product's answer; the network's own output matrix is freed, released_bytes).
    void rank_ann(Context& c, const std::vector<Resolved>& queries, size_t first, size_t count,
                  const engine::Bindings& bindings, uint32_t k, std::vector<float>& scores,
                  std::vector<uint32_t>& top) const {
        const int source = ranker->source();
        for (size_t row = 0; row < count; ++row) {
            const Resolved& q = queries[first + row];
            const BatchRows one{nullptr, row, 1};
            engine::forward_into(network, *c.backend, c.act_ptrs, bindings, one, output_layer);
            const float* h = c.act[source].data();
            ann_queries.fetch_add(1, std::memory_order_relaxed);
            bool complete = false;
            bool ranked = ann_candidates(c, h, q, &complete);
            if (ranked) {
                float* out_scores = scores.data() + row * k;
                ranker->rank(*c.backend, h, c.candidates, k, c.rerank, out_scores,
                             top.data() + row * k);
                // An exhaustive index promises the exact answer: a k-th score tied with the
                // lowest candidate's (ReLU's zeros, a saturated Sigmoid) means items left out
                // may tie with it and come first by id; only every item can say. (An
                // approximate index may miss such ties as it may miss any item.)
                const size_t got = std::min<size_t>(q.k, c.candidates.size());
                if (!complete && got > 0 && ann->exhaustive()) {
                    const float lowest = *std::min_element(
                        c.rerank.scores.begin(), c.rerank.scores.begin() + c.candidates.size());
                    ranked = out_scores[got - 1] > lowest;
                }
            }
            if (!ranked) {
                ann_fallbacks.fetch_add(1, std::memory_order_relaxed);
                ranker->rank_all(*c.backend, h, q.excluded, k, c.rerank, scores.data() + row * k,
                                 top.data() + row * k);
            }
        }
    }

    // The candidates of query q (sorted ids, none excluded) into c.candidates; false when the
    // index cannot give at least min(k, allowed items) of them. *complete: they are every
    // allowed item.
    bool ann_candidates(Context& c, const float* h, const Resolved& q, bool* complete) const {
        // At least k, and the probe: hnsw's search list holds efSearch candidates anyway; for
        // ivf it is a floor (the cells scanned hold far more).
        const size_t base =
            options.ann_fetch ? options.ann_fetch : std::max<size_t>(q.k, ann->probe());
        auto excluded = [&](uint32_t id) {
            return std::binary_search(q.excluded.begin(), q.excluded.end(), id);
        };
        c.candidates.clear();
        if (q.has_allow && q.allowed.size() <= base) {
            // A short allow list: its items are the candidates, all of them.
            for (uint32_t id : q.allowed)
                if (!excluded(id)) c.candidates.push_back(id);
            *complete = true;
            return true;
        }
        const size_t allowed_items = output_n - q.excluded.size();
        const size_t wanted = std::min<size_t>(q.k, allowed_items);
        // Exclusions that are not the complement of an allow list are few: fetch past them.
        size_t fetch = base + (q.has_allow ? 0 : q.excluded.size());
        if (q.has_allow)
            fetch = fetch * std::max<size_t>(1, output_n / std::max<size_t>(1, allowed_items));
        for (;;) {
            fetch = std::min<size_t>(fetch, output_n);
            ann->search(h, fetch, c.ann_ids, c.ann_scratch);
            c.candidates.clear();
            for (int64_t id : c.ann_ids) {
                if (id >= 0 && uint64_t(id) < output_n && !excluded(uint32_t(id)))
                    c.candidates.push_back(uint32_t(id));
            }
            if (c.candidates.size() >= wanted) break;
            // The search found no more, or every item was fetched.
            if (c.ann_ids.size() < fetch || fetch == output_n) return false;
            fetch *= 4;
        }
        // Ascending: AnnRanker's ties go to the lower position, the full path's to the lower id.
        std::sort(c.candidates.begin(), c.candidates.end());
        *complete = c.candidates.size() == allowed_items;
        return true;
    }

    std::string name(uint32_t id) const {
        return id < out_names.size() ? out_names[id] : std::string();
    }
};

Recommender::Recommender(const std::string& model_path, const RecommenderOptions& options)
    : impl_(std::make_unique<Impl>(model_path, options)) {}

Recommender::~Recommender() = default;
Recommender::Recommender(Recommender&&) noexcept = default;
Recommender& Recommender::operator=(Recommender&&) noexcept = default;

Recommendations Recommender::recommend(const std::vector<ItemRef>& items,
                                       const RecommendOptions& options) const {
    std::vector<Resolved> queries;
    queries.push_back(impl_->resolve(items, options));
    std::vector<Recommendations> out(1);
    Impl::Lease context(*impl_);
    impl_->rank(*context, queries, 0, 1, out);
    return std::move(out[0]);
}

Recommendations Recommender::recommend_names(const std::vector<std::string>& item_names,
                                             size_t k) const {
    if (k < 1 || k > UINT32_MAX) {
        throw Error(ErrorCategory::kUsage,
                    "recommend(item_names, k): k must be between 1 and 2^32-1, got " +
                        (k == 0 ? std::string("less than 1") : std::to_string(k)));
    }
    std::vector<ItemRef> items(item_names.begin(), item_names.end());
    RecommendOptions options;
    options.k = static_cast<uint32_t>(k);
    return recommend(items, options);
}

std::vector<Recommendations> Recommender::recommend_batch(const std::vector<Query>& queries) const {
    return recommend_batch(queries, 0);
}

std::vector<Recommendations> Recommender::recommend_batch(const std::vector<Query>& queries,
                                                          int threads) const {
    if (threads < 0) {
        throw Error(ErrorCategory::kUsage,
                    "recommend_batch: threads must be >= 0 (0 = threads_per_call), got " +
                        std::to_string(threads));
    }
    std::vector<Resolved> resolved;
    resolved.reserve(queries.size());
    for (const Query& q : queries) resolved.push_back(impl_->resolve(q.items, q.options));
    std::vector<Recommendations> out(queries.size());
    if (queries.empty()) return out;
    Impl::Lease context(*impl_);
    for (size_t first = 0; first < queries.size(); first += impl_->options.max_batch) {
        const size_t count = std::min<size_t>(impl_->options.max_batch, queries.size() - first);
        impl_->rank(*context, resolved, first, count, out, threads);
    }
    return out;
}

uint32_t Recommender::input_items() const {
    return impl_->input_n;
}
uint32_t Recommender::output_items() const {
    return impl_->output_n;
}
bool Recommender::has_names() const {
    return !impl_->index_path.empty();
}

uint32_t Recommender::id_of(const std::string& name) const {
    if (impl_->index_path.empty()) {
        throw Error(ErrorCategory::kUsage,
                    "id_of('" + name + "'): " + impl_->model_path +
                        " has no feature names (trained on datasets converted without index "
                        "files) and no features index was given "
                        "(RecommenderOptions::features_index)");
    }
    auto it = impl_->ids.find(name);
    if (it == impl_->ids.end()) {
        throw Error(ErrorCategory::kData,
                    "item '" + name + "' is not a label of " + impl_->index_path);
    }
    return it->second;
}

std::string Recommender::name_of(uint32_t id) const {
    return impl_->name(id);
}

bool Recommender::screening() const {
    return impl_->screen != nullptr;
}

std::string Recommender::device() const {
    return impl_->network.device();
}

Precision Recommender::precision() const {
    return impl_->network.precision();
}

bool Recommender::ann() const {
    return impl_->ann != nullptr;
}
uint64_t Recommender::ann_queries() const {
    return impl_->ann_queries.load(std::memory_order_relaxed);
}
uint64_t Recommender::ann_fallbacks() const {
    return impl_->ann_fallbacks.load(std::memory_order_relaxed);
}
size_t Recommender::released_bytes() const {
    return impl_->released_bytes;
}
size_t Recommender::ann_memory_bytes() const {
    return impl_->ann ? impl_->ann->memory_bytes() + impl_->ranker->memory_bytes() : 0;
}

}  // namespace sparsenet
