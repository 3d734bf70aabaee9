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
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sparsenet {

class Network;

namespace engine {

// The buffers of rank_candidates; they only grow.
struct CandidateScratch {
    std::vector<float> gathered;  // the candidates' fp32 weights
    std::vector<float> bias;      // their biases
    std::vector<float> scores;    // their exact activations
    std::vector<float> top_scores;
    std::vector<uint32_t> top_slots;
    std::vector<float> row;  // one item's weights, before a transposing gather
};

// Writes item `id`'s weights (width floats, FP32) to `dst`.
using ItemRowLoader = std::function<void(uint32_t id, float* dst)>;

// The exact top k of c candidate items (distinct ids) for an output layer's source activations
// h [width]: their weights (load_row(id, dst): [width] floats) and biases gathered, then the full
// path's own ops (gemm over the layout the layer's product reads, transposed or not,
// bias_activation_forward, top_k), so each candidate's score has the bits of the full forward
// pass. out_scores / out_ids [k], best first, ties to the lower position (the lower id when the
// candidates are ascending); UINT32_MAX past the candidates' end. The fp16 screen's and the ANN
// index's re-ranking.
void rank_candidates(Backend& be, const float* h, size_t width, bool transposed,
                     const formulas::ActivationParams& activation, const uint32_t* candidates,
                     size_t c, uint32_t k, const ItemRowLoader& load_row,
                     const std::function<float(uint32_t)>& bias_of, CandidateScratch& s,
                     float* out_scores, uint32_t* out_ids);

// Per-call buffers (one per Recommender context); they only grow.
struct ScreenScratch {
    std::vector<float> approx;  // approximate pre-activation of every item, per query [rows, n]
    std::vector<float> bound;   // its error bound
    std::vector<float> heap;    // the k largest lower bounds
    std::vector<uint32_t> candidates;
    CandidateScratch ranked;  // their exact ranking
};

struct ScreenResult {
    bool ranked = false;    // false: too many candidates; the caller runs the full path
    size_t candidates = 0;  // items recomputed in fp32
};

// The fp16 copy of a [k, n] matrix is stored in panels of kFp16Panel columns: panel p holds
// columns [16p, 16p + 16) of row 0, then of row 1, ... of row k - 1 (k x 16 halves, contiguous),
// the last panel padded with zeros. One pass over a panel serves several queries from the L1
// cache, and a single query still reads the whole copy front to back.
constexpr size_t kFp16Panel = 16;
inline size_t fp16_panel_offset(size_t k, size_t q, size_t j) {
    return (j / kFp16Panel) * k * kFp16Panel + q * kFp16Panel + j % kFp16Panel;
}
inline size_t fp16_panel_size(size_t k, size_t n) {
    return (n + kFp16Panel - 1) / kFp16Panel * kFp16Panel * k;
}
// z[r * n + j] = sum_q x[r * k + q] * w(q, j) for r < rows, j < n: x [rows, k], w a [k, n] matrix
// in IEEE fp16 (as uint16_t) stored in panels (fp16_panel_offset), each sum in fp32 in the order
// of q, on up to `threads` threads (split by panels). Exposed for its test.
void fp16_product(const float* x, size_t rows, size_t k, const uint16_t* panels, size_t n, float* z,
                  int threads);
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

    int source() const { return source_; }   // the layer whose activations are the query's row
    size_t width() const { return k_; }      // its units
    bool logits() const { return logits_; }  // a SoftMax layer: ranked by, and scoring, logits
    size_t memory_bytes() const;             // the copies

    // Top-k of one query whose source activations are h [k floats], never returning the sorted
    // unique columns `excluded`: out_scores / out_ids [k], best first, as Backend::top_k.
    ScreenResult rank(Backend& be, const float* h, const std::vector<uint32_t>& excluded,
                      uint32_t k, ScreenScratch& s, float* out_scores, uint32_t* out_ids) const {
        approximate(h, 1, s);
        return rank_approximated(be, h, 0, excluded, k, s, out_scores, out_ids);
    }

    // Several queries at once: approximate() scans the fp16 copy once for `rows` queries whose
    // source activations are h [rows, k] (into s.approx), then rank_approximated() ranks each
    // one, query `row` with its activations h_row, exactly as rank() would (the scan's order of
    // summation is covered by the bound whatever the number of rows). Each row once: ranking
    // adds the bias to the row's approximations in place.
    // `threads`: 0 for the constructor's, else at most that many.
    void approximate(const float* h, size_t rows, ScreenScratch& s, int threads = 0) const;
    ScreenResult rank_approximated(Backend& be, const float* h_row, size_t row,
                                   const std::vector<uint32_t>& excluded, uint32_t k,
                                   ScreenScratch& s, float* out_scores, uint32_t* out_ids) const;

  private:
    size_t k_ = 0, n_ = 0;
    int source_ = -1;
    int threads_ = 1;
    bool transposed_ = false;  // the full path multiplies by stored [n, k] rows (gemm trans_b)
    formulas::ActivationParams activation_;
    bool logits_ = false;
    std::vector<uint16_t> half_;  // [k, n] in panels (fp16_panel_offset)
    std::vector<float> rows_;     // [n, k] unless the network's own matrix is (transposed, packed)
    const float* item_rows_ = nullptr;  // [n, k]: rows_, or the network's own matrix
    std::vector<float> bias_;           // [n]
    std::vector<float> spread_;         // per item: the bound on |approx - exact| per unit ||h||
};

}  // namespace engine
}  // namespace sparsenet
