// Predictor: inference and top-K recommendations with exclusion of what the user already has.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/network.h"

namespace sparsenet {

struct TopK {
    uint64_t rows = 0;
    uint32_t k = 0;
    std::vector<float> scores;      // [rows, k], descending per row; -inf in unused slots
    std::vector<uint32_t> indices;  // [rows, k]; UINT32_MAX in unused slots
};

// Seconds of Predictor::top_k's two phases, added up over its batches (PredictOptions::timings).
struct PredictTimings {
    double score = 0.0;  // the forward passes (waited for on a device)
    // The selection of each row's top K and its download; where the output layer's activation
    // is applied inside the selection (an element-wise one: docs/cli.md, "predict"), it too.
    double top_k = 0.0;
};

struct PredictOptions {
    uint32_t k = 100;
    uint32_t batch = 1024;
    // The layer to rank, by name (any non-input layer); empty: the first Output layer in the
    // config's order.
    std::string output_layer;
    // When set, top_k adds the seconds of each phase here; it then waits for the device after
    // every forward pass (a small cost on a GPU, where the passes otherwise overlap the host).
    PredictTimings* timings = nullptr;
};

class Predictor {
  public:
    // inputs: by name, every Input layer's DataSet; uploaded once here.
    Predictor(Network& network, const std::map<std::string, const Dataset*>& inputs);
    ~Predictor();

    uint64_t rows() const;

    // Dense activations of `output_layer` (default: the first Output layer; any non-input layer
    // by name) for rows [first_row, first_row + count): [count, n].
    std::vector<float> scores(uint64_t first_row, uint32_t count,
                              const std::string& output_layer = "");

    // Top-K for every row. exclude (optional, same rows as the inputs, width <= the output
    // width; an indexed dataset is expanded first): its stored columns are never returned for
    // that row. An exclude that is one of the inputs given to the constructor is read from its
    // upload there (not uploaded again).
    TopK top_k(const PredictOptions& options, const Dataset* exclude = nullptr);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Recommendation quality of a TopK against held-out items (rows aligned) at one K: the single-K
// form of evaluate_ranking (sparsenet/metrics.h, which has every metric at several K), kept for
// existing callers. Indexed datasets (here and in popularity_top_k) are expanded to one row per
// example first.
struct RankingMetrics {
    uint32_t k = 0;
    uint64_t users = 0;      // rows with at least one held-out item
    double recall = 0.0;     // hits / |held-out|, averaged over users
    double precision = 0.0;  // hits / k
    double ndcg = 0.0;       // ideal DCG over min(|held-out|, k) positions
};
RankingMetrics ranking_metrics(const TopK& top, const Dataset& heldout, uint32_t k);

// The popularity baseline: items ranked by how many rows of `train` hold them, excluding each
// row's own items in `train`.
TopK popularity_top_k(const Dataset& train, uint32_t k);

}  // namespace sparsenet
