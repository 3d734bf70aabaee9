// Recommender: the serving API. Loads a model (with the feature names it carries, or a features
// index file) once and answers top-K queries from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/step_switches.h"

namespace sparsenet {

// One item of a query, an allow list or a deny list: by name (a label of the features index) or
// by id (the column, 0-based). The weight is the item's input value; allow and deny lists
// ignore it. Implicit, so that {"a", "b"}, {3, 17} and {{"a", 2.0f}} are lists of items.
struct ItemRef {
    ItemRef(std::string item_name, float item_weight = 1.0f)
        : name(std::move(item_name)), weight(item_weight), by_name(true) {}
    ItemRef(const char* item_name, float item_weight = 1.0f)
        : ItemRef(std::string(item_name), item_weight) {}
    // Any integer type (ItemRef(0) is an id, not a null name); an id outside 0 .. n-1, negative
    // ones included, is an unknown item.
    template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
    ItemRef(I item_id, float item_weight = 1.0f)
        : id(to_id(item_id)), weight(item_weight), by_name(false) {}

    std::string name;  // when by_name
    int64_t id = 0;    // when !by_name
    float weight = 1.0f;
    bool by_name = false;

  private:
    template <class I>
    static int64_t to_id(I v) {
        if constexpr (std::is_unsigned_v<I>) {
            return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
        } else {
            return static_cast<int64_t>(v);
        }
    }
};

struct RecommendOptions {
    uint32_t k = 10;  // at most k results; fewer when fewer items remain after the exclusions
    // Never recommend the query's own items (DSSTNE's predict excludes them too).
    bool exclude_inputs = true;
    // Non-empty: recommend only these items.
    std::vector<ItemRef> allow;
    // Never recommend these items.
    std::vector<ItemRef> deny;
    // false: a name missing from the features index, or an id beyond the model's items, in the
    // query or in allow/deny, throws Error(kData) listing every such item. true: they are skipped
    // and listed in Recommendations::unknown.
    bool ignore_unknown = false;
};

struct Recommendation {
    std::string name;  // the label of the features index; empty without one (or past its end)
    uint32_t id = 0;   // the output column
    float score = 0.0f;
};

struct Recommendations {
    std::vector<Recommendation> items;  // best first (ties: lower id first)
    // Items skipped because of ignore_unknown, as given: names, or ids written in decimal.
    std::vector<std::string> unknown;
    // The scores are logits, not probabilities: a SoftMax output layer answered by an ANN index
    // or fp16 screening, which rank its items by logit z_j = h . w_j + b_j (the order of the
    // probabilities) without computing the normaliser over every item (docs/serving.md, "SoftMax
    // output layers"). false: the layer's activations (its probabilities for SoftMax).
    bool logits = false;
};

struct Query {
    std::vector<ItemRef> items;  // what the user has; duplicates are merged, weights summed
    RecommendOptions options;
};

struct RecommenderOptions {
    // Optional DSSTNE index file ('label<TAB>index' per line, as `sparsenet convert -f` writes
    // it): item names for queries and results. Without it the names the model file carries are
    // used (a model trained on datasets converted with index files); with neither, items are
    // ids only.
    std::string features_index;
    std::string device = "cpu";  // "cpu", or "auto" (a GPU when this build has one)
    // The layer whose activations are ranked; empty: the first Output layer.
    std::string output_layer;
    // CPU threads one call uses, the caller's included. The default 1 lets a service scale with
    // its own request threads, gives the same answers whatever the concurrency, and starts no
    // OpenMP team per calling thread. Raise it to cut the latency of a service with fewer
    // concurrent requests than cores. Products of up to 4 rows (single queries, small batches)
    // never reach OpenBLAS; larger batches do, with the threads OpenBLAS takes from the calling
    // thread's omp_get_max_threads() (docs/library.md, "Threads").
    int threads_per_call = 1;
    // Calls computing at once; more wait (so threads never exceed max_concurrent_calls *
    // threads_per_call). 0: the hardware threads / threads_per_call, at least 1.
    int max_concurrent_calls = 0;
    // recommend_batch runs forward passes of up to this many queries.
    uint32_t max_batch = 256;
    // CPU: rank queries by scanning an fp16 copy of the output layer's weights, half the bytes
    // of the memory-bound product (one scan for up to 16 queries of a recommend_batch), and
    // recomputing in fp32 only the items whose error bound reaches the k-th best: the same
    // results as without it (ids, scores and tie order), for single queries and batches alike.
    // Costs 1.5x the output matrix in memory (an fp16 and a transposed fp32 copy). Needs an output
    // layer with one dense source and an element-wise activation (not SoftMax): Error(kUsage)
    // naming the reason otherwise. A GPU backend ignores it. docs/library.md, "fp16 screening".
    bool fp16_screening = false;
    // The GEMMs' arithmetic (sparsenet/config.h Precision; docs/gpu.md, "Precision"); unset: the
    // model file's $.Training.Precision, else the device's default (as Network::load).
    std::optional<Precision> precision;
    // The loaded network's switches (NetworkOptions::switches: the row padding is the one that
    // matters to inference).
    StepSwitches switches = StepSwitches::process();
    // With precision bf16 (set here or in the model file): keep only the BF16 copies of the
    // weights that GEMMs read (Network::keep_only_bf16_weights): half their memory, the same
    // answers (the GEMMs read the copies either way). Error(kUsage) in another precision and
    // with fp16_screening (whose fp16 copy is made from the FP32 weights). With ann_index the
    // candidates are re-ranked in bf16 too (the output layer's own arithmetic).
    bool bf16_weights_only = false;
    // CPU, any precision: keep the sparse input layer's weights (the matrices only csr_matmul
    // reads: in an autoencoder the largest, [items, hidden]) in BF16 only
    // (Network::keep_bf16_input_weights): half their memory; each query's gather reads BF16
    // weights widened to FP32, so scores are those of the model with those weights rounded to
    // BF16 (docs/serving.md, "Memory"). Combines with ann_index, fp16_screening and
    // bf16_weights_only. Error(kUsage) on a GPU or when no matrix qualifies (tied weights).
    bool bf16_input_weights = false;
    // An ANN index file (`sparsenet ann-index`, docs/serving.md "ANN index"; not a features
    // index): single queries and batches take candidates from it, over-fetched, drop the
    // excluded ones (the query's items, deny, outside allow) and rank the rest exactly with the
    // output layer's own formula. Built from another model: Error(kData) naming the file. An
    // index built exhaustively (kind flat) answers exactly what the model answers without one.
    // Needs the CPU backend and an output layer fit for fp16_screening; it replaces the screen.
    // Memory: the index, whose copy of the item vectors (FP32 or 16-bit, as the file stores
    // them: AnnIndexOptions::vectors) re-ranks too; the network's own output matrix is freed
    // (unless another layer shares it). With 16-bit vectors a candidate's score is the output
    // layer's formula over its rounded weights.
    std::string ann_index;
    // The index's accuracy knob (ivf: the cells scanned; hnsw: efSearch, the candidate list of a
    // search; flat: none, every item is scored); 0: the file's.
    uint32_t ann_probe = 0;
    // Candidates fetched per query before filtering (plus the query's excluded items); 0:
    // max(k, the probe). A query whose filters leave
    // fewer than k of them fetches 4x more, and when the index has no more, is ranked exactly
    // over every item.
    uint32_t ann_fetch = 0;
};

// Thread-safe: every const member may be called from any number of threads at once. Each call
// borrows a context (activations, backend scratch) from a pool that grows to
// max_concurrent_calls; the network's weights are shared and never written. Results do not
// depend on how many calls run at once. Errors are sparsenet::Error: kIo / kConfig / kData
// from loading, kData for unknown items (listing them), kUsage for bad options.
class Recommender {
  public:
    explicit Recommender(const std::string& model_path, const RecommenderOptions& options = {});
    ~Recommender();
    Recommender(const Recommender&) = delete;
    Recommender& operator=(const Recommender&) = delete;
    Recommender(Recommender&&) noexcept;
    Recommender& operator=(Recommender&&) noexcept;

    // Top-K for one user who has `items`.
    Recommendations recommend(const std::vector<ItemRef>& items,
                              const RecommendOptions& options = {}) const;
    // The simple form: the user's items by name, k results (k >= 1, else Error(kUsage)), the
    // other options at their defaults (the query's own items excluded, unknown names an error).
    // recommend({"50", "100"}, 10). Names come from the model file (trained on datasets
    // converted with index files) or RecommenderOptions::features_index; without either,
    // Error(kUsage) saying so.
    // (A template on the integer type of k, so that recommend({...}, {}) keeps meaning the
    // options form above.)
    template <class K, std::enable_if_t<std::is_integral_v<K> && !std::is_same_v<K, bool>, int> = 0>
    Recommendations recommend(const std::vector<std::string>& item_names, K k) const {
        if constexpr (std::is_signed_v<K>) {
            if (k < 1) return recommend_names(item_names, 0);
        }
        return recommend_names(item_names, static_cast<size_t>(k));
    }
    // recommend(item_names, k) for a size_t k.
    Recommendations recommend_names(const std::vector<std::string>& item_names, size_t k) const;

    // One result per query, in order, each exactly as recommend(query.items, query.options)
    // would rank it. With fp16 screening, bit for bit: groups of up to 16 queries share one scan
    // of the fp16 copy and each query is then ranked as alone. Without it, queries share forward
    // passes of up to max_batch rows, and a product over several rows may sum in a different
    // order than over one (scores agree to a few ulp). Validation happens first: an unknown item
    // anywhere (without ignore_unknown) throws before anything is computed.
    std::vector<Recommendations> recommend_batch(const std::vector<Query>& queries) const;
    // As above, the fp16 scans on at most `threads` threads (0: threads_per_call), for a service
    // that sometimes keeps every core busy with calls of its own (`sparsenet serve` asks for one
    // thread while other requests wait, for all of them otherwise). The answers do not depend on
    // it. Products other than the screen's use threads_per_call.
    std::vector<Recommendations> recommend_batch(const std::vector<Query>& queries,
                                                 int threads) const;

    uint32_t input_items() const;   // width of the Input layer (valid query ids: 0 .. n-1)
    uint32_t output_items() const;  // width of the ranked layer (valid result ids)
    // Item names are known: from RecommenderOptions::features_index, or else from the model
    // file (the features indexes it was trained with); false: items are ids only.
    bool has_names() const;
    // The id of a name, or Error(kData) naming it; Error(kUsage) without a features index.
    uint32_t id_of(const std::string& name) const;
    // The name of an id; empty without a features index or past its end.
    std::string name_of(uint32_t id) const;
    // Whether single queries are screened (fp16_screening asked for, on a CPU backend).
    bool screening() const;
    // The backend's name ("cpu", "cuda:0") and the GEMMs' arithmetic the model is scored in.
    std::string device() const;
    Precision precision() const;
    // Whether queries are answered from an ANN index (RecommenderOptions::ann_index).
    bool ann() const;
    // Queries answered from the ANN index since construction, and those of them that fell back
    // to the exact product (filters left too few candidates).
    uint64_t ann_queries() const;
    uint64_t ann_fallbacks() const;
    // Bytes the ANN index and its exact re-ranking vectors take (0 without an index).
    size_t ann_memory_bytes() const;
    // Bytes of the network's weights freed after loading: the output matrix (ann_index) and the
    // FP32 input weights less their BF16 copies (bf16_input_weights).
    size_t released_bytes() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sparsenet
