// Screened top-K of one query on the CPU (RecommenderOptions::fp16_screening).
//
// A single query's output layer is a product of one row by the whole weight matrix, bound by the
// memory bandwidth of reading the matrix (docs/benchmarks.md, "Library"). The screen reads an fp16
// copy of the matrix instead (half the bytes) and bounds, per item, how far its approximate
// pre-activation can be from the one the fp32 path computes; only the items whose bound reaches
// the k-th best are recomputed, from fp32 weights, by the same backend ops as the full forward
// pass. The result is the full path's (same ids, same scores, same tie order) for any element-wise
// monotone activation; docs/library.md ("fp16 screening") has the argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sparsenet {

class Network;

namespace engine {

// Per-call buffers (one per Recommender context); they only grow.
struct ScreenScratch {
    std::vector<float> approx;  // approximate pre-activation of every item
    std::vector<float> bound;   // its error bound
    std::vector<float> heap;    // the k largest lower bounds
    std::vector<uint32_t> candidates;
    std::vector<float> gathered;  // the candidates' fp32 weights
    std::vector<float> bias;      // their biases
    std::vector<float> scores;    // their exact activations
    std::vector<float> top_scores;
    std::vector<uint32_t> top_slots;
};

struct ScreenResult {
    bool ranked = false;    // false: too many candidates; the caller runs the full path
    size_t candidates = 0;  // items recomputed in fp32
};

// z[j] = sum_q x[q] * w[q * n + j] for j < n, w in IEEE fp16 (as uint16_t), summed in fp32 on up
// to `threads` threads. Exposed for its test.
void fp16_product(const float* x, size_t k, const uint16_t* w, size_t n, float* z, int threads);
// Round to nearest even; values beyond the fp16 range become infinities.
uint16_t to_fp16(float value);
float from_fp16(uint16_t value);

class OutputScreen {
  public:
    // Why layer `output` of `net` cannot be screened ("" when it can): it needs one dense source
    // edge, no Skip into it, nothing reading its activations and an element-wise activation.
    static std::string unsupported(const Network& net, int output);
    // Copies the output matrix: fp16 [k, n] and, unless the edge uses a shared matrix transposed
    // (whose storage already is [n, k]), fp32 [n, k]. Error(kUsage) for weights fp16 cannot hold.
    OutputScreen(const Network& net, int output, int threads);

    int source() const { return source_; }  // the layer whose activations are the query's row
    size_t memory_bytes() const;            // the copies

    // Top-k of one query whose source activations are h [k floats], never returning the sorted
    // unique columns `excluded`: out_scores / out_ids [k], best first, as Backend::top_k.
    ScreenResult rank(Backend& be, const float* h, const std::vector<uint32_t>& excluded,
                      uint32_t k, ScreenScratch& s, float* out_scores, uint32_t* out_ids) const;

  private:
    size_t k_ = 0, n_ = 0;
    int source_ = -1;
    int threads_ = 1;
    bool transposed_ = false;  // the full path multiplies by stored [n, k] rows (gemm trans_b)
    formulas::ActivationParams activation_;
    std::vector<uint16_t> half_;        // [k, n]
    std::vector<float> rows_;           // [n, k] when !transposed_
    const float* item_rows_ = nullptr;  // [n, k]: rows_, or the network's own matrix
    std::vector<float> bias_;           // [n]
    std::vector<float> spread_;         // per item: the bound on |approx - exact| per unit ||h||
};

}  // namespace engine
}  // namespace sparsenet
