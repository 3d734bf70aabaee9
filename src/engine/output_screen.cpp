// fp16 screening of one query's output layer (output_screen.h). Why the result is exact:
//
// Let y_j be the pre-activation the full path computes for item j (fp32 product plus bias) and
// a_j = f(y_j) its score, ranked by (a desc, j asc). The screen computes y~_j from fp16 weights
// and a bound B_j >= |y~_j - y_j| (below). T is the k-th largest y~_j - B_j over the allowed
// items, so at least k of them have y_j >= T and, f being monotone, a_j >= f(T). x_F is the
// smallest float with f(x_F) >= f(T). An item with y~_i + B_i < x_F has y_i < x_F, so
// a_i < f(T): below at least k items, whatever the tie order. The others (the candidates) are
// recomputed by the full path's own ops (gemm on their fp32 weights, bias_activation_forward,
// top_k), which compute each item independently of its neighbours: the same bits.
//
// The bound, for h = the query's source activations, M_j / H_j item j's fp32 / fp16 weights:
//   |y~_j - y_j| <= ||h|| ||M_j - H_j|| + gamma (||h|| ||M_j|| + ||h|| ||H_j||) + bias rounding,
// Cauchy-Schwarz for the fp16 rounding of the weights and the classic gamma_k = k u / (1 - k u)
// (u = 2^-24) bound on the rounding of each of the two fp32 sums, whatever their order. The
// per-item factor ("spread") is computed once in double; slack factors cover the rounding of
// the per-query float arithmetic (B itself, y~ - B, y~ + B).
#include "engine/output_screen.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#if defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "engine/network_scoring.h"
#include "formulas/precision.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"

namespace sparsenet::engine {

uint16_t to_fp16(float value) {
    return formulas::fp16_bits(value);
}

float from_fp16(uint16_t value) {
    return formulas::fp16_to_float(value);
}

namespace {

// Panel rows (32 bytes each) read ahead of the one being multiplied. The hardware prefetcher
// alone left the first multiply-add of each row waiting for memory about half of the time
// (perf annotate, groups of 8 queries on the ML-20M shape); reading ahead took a group of 8 from
// 1,420 to 1,820 queries/s. A single query (R = 1) streams at the memory's pace without it, and
// lost 20 % with it.
constexpr size_t kAhead = 32;

// Rows per pass over a panel: the accumulators that fit the vector registers (AVX-512: 32
// registers of one panel row each; AVX2: 16 registers of half a panel row).
#if defined(__AVX512F__)
constexpr int kRowsPerPass = 12;
#else
constexpr int kRowsPerPass = 6;
#endif

// Rows [0, R) of x [R, k] times one panel (k x 16 halves): z[r * ldz + c] for c < width, the
// panel's columns that exist. Each sum runs over q in order, one fused multiply-add per term.
// Two vectors of 8 columns times R rows stay in registers for the whole panel (R <= 6: 12
// accumulators, 2 weight vectors and a broadcast in the 16 AVX registers); the panel's two
// conversions are shared by the R rows, which is what makes a group of queries cheaper per query
// than one alone once the scan stops being bound by memory.
template <int R>
void panel_product(const float* x, size_t k, const uint16_t* panel, float* z, size_t ldz,
                   size_t width) {
    alignas(64) float out[R][kFp16Panel];
#if defined(__AVX512F__)
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (size_t q = 0; q < k; ++q) {
        if constexpr (R > 1) {
            _mm_prefetch(reinterpret_cast<const char*>(panel + (q + kAhead) * kFp16Panel),
                         _MM_HINT_T0);
        }
        // maskz with every lane: _mm512_cvtph_ps's undefined passthrough makes GCC 12 warn
        // (-Wmaybe-uninitialized); the conversion is the same instruction.
        const __m512 w = _mm512_maskz_cvtph_ps(
            __mmask16(0xffff),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * kFp16Panel)));
        for (int r = 0; r < R; ++r)
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * k + q]), w, acc[r]);
    }
    for (int r = 0; r < R; ++r) _mm512_store_ps(out[r], acc[r]);
#elif defined(__F16C__) && defined(__FMA__)
    __m256 lo[R], hi[R];
    for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
    for (size_t q = 0; q < k; ++q) {
        if constexpr (R > 1) {
            _mm_prefetch(reinterpret_cast<const char*>(panel + (q + kAhead) * kFp16Panel),
                         _MM_HINT_T0);
        }
        const uint16_t* w = panel + q * kFp16Panel;
        const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
        const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 8)));
        for (int r = 0; r < R; ++r) {
            const __m256 c = _mm256_set1_ps(x[r * k + q]);
            lo[r] = _mm256_fmadd_ps(c, w0, lo[r]);
            hi[r] = _mm256_fmadd_ps(c, w1, hi[r]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm256_store_ps(out[r], lo[r]);
        _mm256_store_ps(out[r] + 8, hi[r]);
    }
#else
    for (int r = 0; r < R; ++r) std::fill(out[r], out[r] + kFp16Panel, 0.0f);
    for (size_t q = 0; q < k; ++q) {
        for (size_t c = 0; c < kFp16Panel; ++c) {
            const float w = from_fp16(panel[q * kFp16Panel + c]);
            for (int r = 0; r < R; ++r) out[r][c] = std::fma(x[r * k + q], w, out[r][c]);
        }
    }
#endif
    for (int r = 0; r < R; ++r) std::copy_n(out[r], width, z + r * ldz);
}

// The last rows (fewer than kRowsPerPass) of a panel's pass, with panel_product<rows>.
template <int R = kRowsPerPass - 1>
void panel_product_tail(size_t rows, const float* x, size_t k, const uint16_t* panel, float* z,
                        size_t ldz, size_t width) {
    if constexpr (R > 0) {
        if (rows == R) return panel_product<R>(x, k, panel, z, ldz, width);
        panel_product_tail<R - 1>(rows, x, k, panel, z, ldz, width);
    }
}

// Panels [p0, p1) of the product for all rows, kRowsPerPass rows per pass over a panel (the
// later passes read it from the L1 cache).
void product_panels(const float* x, size_t rows, size_t k, const uint16_t* panels, size_t n,
                    float* z, size_t p0, size_t p1) {
    for (size_t p = p0; p < p1; ++p) {
        const uint16_t* panel = panels + p * k * kFp16Panel;
        const size_t j = p * kFp16Panel, width = std::min(kFp16Panel, n - j);
        size_t r = 0;
        for (; r + kRowsPerPass <= rows; r += kRowsPerPass) {
            panel_product<kRowsPerPass>(x + r * k, k, panel, z + r * n + j, n, width);
        }
        panel_product_tail(rows - r, x + r * k, k, panel, z + r * n + j, n, width);
    }
}

// Order-preserving map of floats (NaN aside) to unsigned integers, and back.
uint32_t order_key(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
float from_order_key(uint32_t key) {
    const uint32_t u = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

// The smallest float x with f(x) >= f(t), f monotone (plateaus included: Sigmoid saturates, ReLU
// is flat below 0). Bisection over the floats in [-inf, t].
float plateau_start(const formulas::ActivationParams& f, float t) {
    const float target = formulas::activate(f, t);
    const float lowest = -std::numeric_limits<float>::infinity();
    if (formulas::activate(f, lowest) >= target) return lowest;
    uint32_t below = order_key(lowest), at = order_key(t);  // f(below) < target <= f(at)
    while (at - below > 1) {
        const uint32_t mid = below + (at - below) / 2;
        if (formulas::activate(f, from_order_key(mid)) >= target) {
            at = mid;
        } else {
            below = mid;
        }
    }
    return from_order_key(at);
}

}  // namespace

void fp16_product(const float* x, size_t rows, size_t k, const uint16_t* panels, size_t n, float* z,
                  int threads) {
    const size_t count = (n + kFp16Panel - 1) / kFp16Panel;
    // Chunks of panels handed out as threads ask (each panel's sums are the same whichever
    // thread computes it): a team member descheduled by the service's other threads delays
    // only its chunk, where a static split made the whole team wait at the barrier.
    constexpr size_t kChunk = 64;
    const size_t chunks = (count + kChunk - 1) / kChunk;
    const int team = threads > 1 && rows * k * n >= (size_t(1) << 16)
                         ? int(std::min<size_t>(size_t(threads), chunks))
                         : 1;
#pragma omp parallel for num_threads(team) schedule(dynamic, 1) if (team > 1)
    for (size_t c = 0; c < chunks; ++c) {
        product_panels(x, rows, k, panels, n, z, c * kChunk, std::min(count, (c + 1) * kChunk));
    }
}

std::string OutputScreen::unsupported(const Network& network, int output) {
    return dense_output_edge(network, output).unsupported;
}

OutputScreen::OutputScreen(const Network& network, int output, int threads)
    : threads_(std::max(1, threads)) {
    const DenseOutputEdge edge = dense_output_edge(network, output);
    if (!edge.unsupported.empty()) {
        throw Error(ErrorCategory::kUsage, "fp16_screening: " + edge.unsupported);
    }
    if (network.device() != "cpu") {
        throw Error(ErrorCategory::kInternal, "fp16 screening runs on the CPU backend only");
    }
    source_ = edge.source;
    k_ = edge.k;
    n_ = edge.n;
    transposed_ = edge.transposed;
    activation_ = edge.activation;
    logits_ = edge.logits;
    // The matrix this edge multiplies by: element (q, j) of [k, n], stored [k, n], or [n, k]
    // when the edge uses its owner's matrix transposed. The CPU backend's memory is host memory.
    const float* stored = edge.stored;
    const size_t ld = edge.ld;
    auto at = [&](size_t q, size_t j) {
        return transposed_ ? stored[j * ld + q] : stored[q * ld + j];
    };
    half_.assign(fp16_panel_size(k_, n_), 0);
    std::vector<double> err2(n_, 0.0), full2(n_, 0.0), half2(n_, 0.0);
    for (size_t q = 0; q < k_; ++q) {
        for (size_t j = 0; j < n_; ++j) {
            const float m = at(q, j);
            const uint16_t h = to_fp16(m);
            const float hv = from_fp16(h);
            if (!std::isfinite(m) || !std::isfinite(hv)) {
                throw Error(ErrorCategory::kUsage,
                            "fp16_screening: " + edge.weight_name + " holds " + std::to_string(m) +
                                " at (" + std::to_string(q) + ", " + std::to_string(j) +
                                "); fp16 holds finite magnitudes up to 65504 only");
            }
            half_[fp16_panel_offset(k_, q, j)] = h;
            err2[j] += (double(m) - hv) * (double(m) - hv);
            full2[j] += double(m) * m;
            half2[j] += double(hv) * hv;
        }
    }
    const double u = std::ldexp(1.0, -24);
    const double gamma = double(k_ + 4) * u / (1.0 - double(k_ + 4) * u);
    spread_.resize(n_);
    for (size_t j = 0; j < n_; ++j) {
        const double s = std::sqrt(err2[j]) + gamma * (std::sqrt(full2[j]) + std::sqrt(half2[j]));
        spread_[j] = float(s * (1.0 + std::ldexp(1.0, -20)));
    }
    if (transposed_ && ld == k_) {
        item_rows_ = edge.stored;
    } else {  // [n, k] packed: item j's row at j * k
        rows_.resize(n_ * k_);
        for (size_t q = 0; q < k_; ++q)
            for (size_t j = 0; j < n_; ++j) rows_[j * k_ + q] = at(q, j);
        item_rows_ = rows_.data();
    }
    bias_.assign(edge.bias, edge.bias + n_);
}

size_t OutputScreen::memory_bytes() const {
    return half_.size() * sizeof(uint16_t) +
           (rows_.size() + bias_.size() + spread_.size()) * sizeof(float);
}

void OutputScreen::approximate(const float* h, size_t rows, ScreenScratch& s, int threads) const {
    s.approx.resize(rows * n_);
    fp16_product(h, rows, k_, half_.data(), n_, s.approx.data(),
                 threads > 0 ? std::min(threads, threads_) : threads_);
}

void rank_candidates(Backend& be, const float* h, size_t width, bool transposed,
                     const formulas::ActivationParams& activation, const uint32_t* candidates,
                     size_t c, uint32_t k, const ItemRowLoader& load_row,
                     const std::function<float(uint32_t)>& bias_of, CandidateScratch& s,
                     float* out_scores, uint32_t* out_ids) {
    s.gathered.resize(c * width);
    if (transposed) {  // gemm(h, rows^T): rows [c, width]
        for (size_t i = 0; i < c; ++i) load_row(candidates[i], s.gathered.data() + i * width);
    } else {  // gemm(h, columns): [width, c]
        s.row.resize(width);
        for (size_t i = 0; i < c; ++i) {
            load_row(candidates[i], s.row.data());
            for (size_t q = 0; q < width; ++q) s.gathered[q * c + i] = s.row[q];
        }
    }
    s.bias.resize(c);
    s.scores.resize(std::max<size_t>(c, 1));
    for (size_t i = 0; i < c; ++i) s.bias[i] = bias_of(candidates[i]);
    s.top_scores.resize(k);
    s.top_slots.resize(k);
    if (c > 0) {
        const MatrixView scores{s.scores.data(), 1, c, c};
        const ConstMatrixView hv(h, 1, width, width);
        if (transposed) {
            be.gemm(false, true, 1.0f, hv, ConstMatrixView(s.gathered.data(), c, width, width),
                    0.0f, scores);
        } else {
            be.gemm(false, false, 1.0f, hv, ConstMatrixView(s.gathered.data(), width, c, c), 0.0f,
                    scores);
        }
        be.bias_activation_forward(activation, s.bias.data(), scores);
        be.top_k(scores, nullptr, k, s.top_scores.data(), s.top_slots.data());
    } else {
        std::fill(s.top_scores.begin(), s.top_scores.end(),
                  -std::numeric_limits<float>::infinity());
        std::fill(s.top_slots.begin(), s.top_slots.end(), UINT32_MAX);
    }
    for (size_t i = 0; i < k; ++i) {
        out_scores[i] = s.top_scores[i];
        out_ids[i] = s.top_slots[i] == UINT32_MAX ? UINT32_MAX : candidates[s.top_slots[i]];
    }
}

ScreenResult OutputScreen::rank_approximated(Backend& be, const float* h, size_t row,
                                             const std::vector<uint32_t>& excluded, uint32_t k,
                                             ScreenScratch& s, float* out_scores,
                                             uint32_t* out_ids) const {
    ScreenResult result;
    double h2 = 0.0;
    for (size_t q = 0; q < k_; ++q) h2 += double(h[q]) * h[q];
    const float scale = float(std::sqrt(h2) * (1.0 + std::ldexp(1.0, -10)));
    if (!std::isfinite(scale)) return result;

    s.bound.resize(n_);
    float* __restrict y = s.approx.data() + row * n_;
    float* __restrict b = s.bound.data();
#pragma omp simd
    for (size_t j = 0; j < n_; ++j) {
        y[j] += bias_[j];
        b[j] = scale * spread_[j] + 0x1p-22f * std::fabs(y[j]) + 1e-30f;
    }

    // T: the k-th largest lower bound of an allowed item (a min-heap of the k largest).
    s.heap.clear();
    auto allowed = [&](size_t j, size_t& e) {
        while (e < excluded.size() && excluded[e] < j) ++e;
        return e == excluded.size() || excluded[e] != j;
    };
    size_t e = 0;
    for (size_t j = 0; j < n_; ++j) {
        const float low = y[j] - b[j];
        if (s.heap.size() == k && !(low > s.heap.front())) continue;
        if (!allowed(j, e)) continue;
        if (s.heap.size() == k) {
            std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<float>());
            s.heap.back() = low;
        } else {
            s.heap.push_back(low);
        }
        std::push_heap(s.heap.begin(), s.heap.end(), std::greater<float>());
    }
    // Fewer allowed items than k: every one is a candidate.
    float threshold = -std::numeric_limits<float>::infinity();
    if (s.heap.size() == k) {
        const float t = s.heap.front();
        threshold = plateau_start(activation_, t - (std::fabs(t) * 0x1p-20f + 1e-30f));
    }
    s.candidates.clear();
    e = 0;
    for (size_t j = 0; j < n_; ++j) {
        if (y[j] + b[j] >= threshold && allowed(j, e)) s.candidates.push_back(uint32_t(j));
    }
    const size_t c = s.candidates.size();
    result.candidates = c;
    if (c > std::max<size_t>(n_ / 16, 4 * size_t(k) + 64)) return result;

    // The candidates through the full path's ops (ties: lower position, which is the lower id).
    rank_candidates(
        be, h, k_, transposed_, activation_, s.candidates.data(), c, k,
        [this](uint32_t id, float* dst) { std::copy_n(item_rows_ + size_t(id) * k_, k_, dst); },
        [this](uint32_t id) { return bias_[id]; }, s.ranked, out_scores, out_ids);
    result.ranked = true;
    return result;
}

}  // namespace sparsenet::engine
