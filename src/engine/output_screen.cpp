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
#include "sparsenet/error.h"
#include "sparsenet/network.h"

#if !defined(__FLT16_MAX__)
#error "fp16 screening needs the compiler's _Float16 (GCC >= 12, Clang >= 15 on x86-64)"
#endif

namespace sparsenet::engine {

uint16_t to_fp16(float value) {
    const _Float16 h = static_cast<_Float16>(value);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
}

float from_fp16(uint16_t value) {
    _Float16 h;
    std::memcpy(&h, &value, sizeof h);
    return static_cast<float>(h);
}

namespace {

// z[j0, j1) += sum over the rows r < R of x[r] * w[r * n + j].
template <int R>
void add_rows(const float* x, const uint16_t* w, size_t n, float* z, size_t j0, size_t j1) {
    size_t j = j0;
#if defined(__F16C__) && defined(__FMA__)
    __m256 c[R];
    for (int r = 0; r < R; ++r) c[r] = _mm256_set1_ps(x[r]);
    for (; j + 8 <= j1; j += 8) {
        __m256 acc = _mm256_loadu_ps(z + j);
        for (int r = 0; r < R; ++r) {
            const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + r * n + j));
            acc = _mm256_fmadd_ps(c[r], _mm256_cvtph_ps(half), acc);
        }
        _mm256_storeu_ps(z + j, acc);
    }
#endif
    for (; j < j1; ++j) {
        float sum = z[j];
        for (int r = 0; r < R; ++r) sum += x[r] * from_fp16(w[r * n + j]);
        z[j] = sum;
    }
}

// The columns [j0, j1) of the product, eight rows of w per pass over them.
void product_slice(const float* x, size_t k, const uint16_t* w, size_t n, float* z, size_t j0,
                   size_t j1) {
    std::fill(z + j0, z + j1, 0.0f);
    size_t q = 0;
    for (; q + 8 <= k; q += 8) add_rows<8>(x + q, w + q * n, n, z, j0, j1);
    for (; q < k; ++q) add_rows<1>(x + q, w + q * n, n, z, j0, j1);
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

void fp16_product(const float* x, size_t k, const uint16_t* w, size_t n, float* z, int threads) {
    const int team = threads > 1 && k * n >= (size_t(1) << 16) ? threads : 1;
    const size_t width = (n / size_t(team) + 16) / 16 * 16;
#pragma omp parallel for num_threads(team) schedule(static) if (team > 1)
    for (int t = 0; t < team; ++t) {
        const size_t j0 = std::min(n, size_t(t) * width), j1 = std::min(n, j0 + width);
        if (j0 < j1) product_slice(x, k, w, n, z, j0, j1);
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
    // The matrix this edge multiplies by: element (q, j) of [k, n], stored [k, n], or [n, k]
    // when the edge uses its owner's matrix transposed. The CPU backend's memory is host memory.
    const float* stored = edge.stored;
    auto at = [&](size_t q, size_t j) {
        return transposed_ ? stored[j * k_ + q] : stored[q * n_ + j];
    };
    half_.resize(k_ * n_);
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
            half_[q * n_ + j] = h;
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
    if (transposed_) {
        item_rows_ = edge.stored;
    } else {
        rows_.resize(n_ * k_);
        for (size_t q = 0; q < k_; ++q)
            for (size_t j = 0; j < n_; ++j) rows_[j * k_ + q] = stored[q * n_ + j];
        item_rows_ = rows_.data();
    }
    bias_.assign(edge.bias, edge.bias + n_);
}

size_t OutputScreen::memory_bytes() const {
    return half_.size() * sizeof(uint16_t) +
           (rows_.size() + bias_.size() + spread_.size()) * sizeof(float);
}

ScreenResult OutputScreen::rank(Backend& be, const float* h, const std::vector<uint32_t>& excluded,
                                uint32_t k, ScreenScratch& s, float* out_scores,
                                uint32_t* out_ids) const {
    ScreenResult result;
    double h2 = 0.0;
    for (size_t q = 0; q < k_; ++q) h2 += double(h[q]) * h[q];
    const float scale = float(std::sqrt(h2) * (1.0 + std::ldexp(1.0, -10)));
    if (!std::isfinite(scale)) return result;

    s.approx.resize(n_);
    s.bound.resize(n_);
    fp16_product(h, k_, half_.data(), n_, s.approx.data(), threads_);
    float* __restrict y = s.approx.data();
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

    // The candidates through the full path's ops: their columns of the product, bias and
    // activation, top_k (ties: lower position, which is the lower id).
    s.gathered.resize(c * k_);
    if (transposed_) {  // gemm(h, rows^T): rows [c, k]
        for (size_t i = 0; i < c; ++i) {
            std::copy_n(item_rows_ + size_t(s.candidates[i]) * k_, k_, s.gathered.begin() + i * k_);
        }
    } else {  // gemm(h, columns): [k, c]
        for (size_t i = 0; i < c; ++i) {
            const float* row = item_rows_ + size_t(s.candidates[i]) * k_;
            for (size_t q = 0; q < k_; ++q) s.gathered[q * c + i] = row[q];
        }
    }
    s.bias.resize(c);
    s.scores.resize(std::max<size_t>(c, 1));
    for (size_t i = 0; i < c; ++i) s.bias[i] = bias_[s.candidates[i]];
    s.top_scores.resize(k);
    s.top_slots.resize(k);
    if (c > 0) {
        const MatrixView scores{s.scores.data(), 1, c, c};
        const ConstMatrixView hv(h, 1, k_, k_);
        if (transposed_) {
            be.gemm(false, true, 1.0f, hv, ConstMatrixView(s.gathered.data(), c, k_, k_), 0.0f,
                    scores);
        } else {
            be.gemm(false, false, 1.0f, hv, ConstMatrixView(s.gathered.data(), k_, c, c), 0.0f,
                    scores);
        }
        be.bias_activation_forward(activation_, s.bias.data(), scores);
        be.top_k(scores, nullptr, k, s.top_scores.data(), s.top_slots.data());
    } else {
        std::fill(s.top_scores.begin(), s.top_scores.end(),
                  -std::numeric_limits<float>::infinity());
        std::fill(s.top_slots.begin(), s.top_slots.end(), UINT32_MAX);
    }
    for (size_t i = 0; i < k; ++i) {
        out_scores[i] = s.top_scores[i];
        out_ids[i] = s.top_slots[i] == UINT32_MAX ? UINT32_MAX : s.candidates[s.top_slots[i]];
    }
    result.ranked = true;
    return result;
}

}  // namespace sparsenet::engine
