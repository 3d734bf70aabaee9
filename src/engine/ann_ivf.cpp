// IVF cells (ann_ivf.h): k-means over the ANN index's stored vectors, and the cells' search.
#include "engine/ann_ivf.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace sparsenet::engine {

namespace {

constexpr uint32_t kIterations = 10;   // Lloyd iterations over the sample
constexpr size_t kSamplePerCell = 64;  // k-means sample: 64 items a cell (faiss's advice: 39+)
constexpr size_t kBlock = 1024;        // rows per sgemm of the assignment
constexpr uint64_t kSeed = 0x1F0A2B3C4D5E6F70ull;

uint64_t splitmix(uint64_t& s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// For rows x [rows, dims]: the nearest centroid of each (ties to the lower cell) and its squared
// distance |x - c|^2 = |x|^2 + |c|^2 - 2 x . c, the products from one sgemm.
void nearest(const float* x, size_t rows, const IvfCells& m, std::vector<float>& g, uint32_t* cell,
             float* dist) {
    const size_t cells = m.cells, dims = m.dims;
    g.resize(rows * cells);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(cells), int(dims), 1.0f, x,
                int(dims), m.centroids.data(), int(dims), 0.0f, g.data(), int(cells));
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; ++r) {
        const float* gr = g.data() + r * cells;
        float best = std::numeric_limits<float>::infinity();
        uint32_t at = 0;
        for (size_t c = 0; c < cells; ++c) {
            const float d = m.centroid_norms[c] - 2.0f * gr[c];
            if (d < best) {
                best = d;
                at = uint32_t(c);
            }
        }
        float xx = 0.0f;
        for (size_t q = 0; q < dims; ++q) xx += x[r * dims + q] * x[r * dims + q];
        cell[r] = at;
        if (dist) dist[r] = std::max(0.0f, xx + best);
    }
}

// The initial centroids by k-means++ (each next one an item drawn with probability in
// proportion to its squared distance from the nearest one so far) over every stride-th row of
// x [rows, dims], at most 8 rows a cell: with items drawn uniformly, clusters that none was
// drawn from would share a centroid with their neighbours, and Lloyd's iterations seldom
// separate them. Cost: cells x 8 cells x dims.
void seed_centroids(const float* x, size_t rows, size_t dims, uint32_t cells, uint64_t& seed,
                    float* centroids) {
    const size_t stride = std::max<size_t>(1, rows / (size_t(cells) * 8));
    const size_t t = (rows + stride - 1) / stride;  // candidate rows: 0, stride, 2 stride, ...
    std::vector<double> d2(t, std::numeric_limits<double>::infinity());
    std::vector<char> taken(t, 0);
    size_t pick = size_t(splitmix(seed) % t);
    for (uint32_t c = 0; c < cells; ++c) {
        const float* chosen = x + pick * stride * dims;
        std::copy_n(chosen, dims, centroids + size_t(c) * dims);
        taken[pick] = 1;
        if (c + 1 == cells) break;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < t; ++i) {
            const float* xi = x + i * stride * dims;
            float d = 0.0f;
#pragma omp simd reduction(+ : d)
            for (size_t q = 0; q < dims; ++q) d += (xi[q] - chosen[q]) * (xi[q] - chosen[q]);
            d2[i] = taken[i] ? 0.0 : std::min(d2[i], double(d));
        }
        double total = 0.0;  // in row order: the same draws on any number of threads
        for (size_t i = 0; i < t; ++i) total += d2[i];
        // The next: the row where the running sum of d2 passes a uniform draw over the total
        // (the first row not taken when every distance is 0: duplicates).
        const double target = double(splitmix(seed) >> 11) * 0x1.0p-53 * total;
        double run = 0.0;
        size_t next = t;
        for (size_t i = 0; i < t && next == t; ++i) {
            run += d2[i];
            if (!taken[i] && d2[i] > 0.0 && run >= target) next = i;
        }
        for (size_t i = 0; i < t && next == t; ++i)
            if (!taken[i]) next = i;
        if (next == t) next = pick;  // fewer candidate rows than cells: repeat the last
        pick = next;
    }
}

void update_norms(IvfCells& m) {
    m.centroid_norms.assign(m.cells, 0.0f);
    for (size_t c = 0; c < m.cells; ++c) {
        const float* p = m.centroids.data() + c * m.dims;
        float s = 0.0f;
        for (size_t q = 0; q < m.dims; ++q) s += p[q] * p[q];
        m.centroid_norms[c] = s;
    }
}

}  // namespace

uint32_t ivf_default_cells(uint64_t n) {
    // At or above 4 sqrt(n) (faiss's advice: 4 to 16 sqrt(n)). Rounded down instead, 2,000,000
    // items got 4,096 cells and recall@100 0.825 scanning 128 of them, 8,192 cells 0.935
    // (docs/benchmarks-ann.md, "ANN index: cells against the graph").
    if (n == 0) return 0;
    const double want = 4.0 * std::sqrt(double(n));
    uint32_t cells = 1;
    while (cells < 65536 && double(cells) < want) cells *= 2;
    return uint32_t(std::min<uint64_t>(cells, n));
}

bool IvfCells::finish() {
    const size_t n = item_of.size();
    if (offsets.size() != size_t(cells) + 1 || offsets.front() != 0 || offsets.back() != n ||
        centroids.size() != size_t(cells) * dims || vectors.size() != n * item_bytes) {
        return false;
    }
    for (size_t c = 0; c < cells; ++c)
        if (offsets[c] > offsets[c + 1]) return false;
    slot_of.assign(n, UINT32_MAX);
    for (size_t s = 0; s < n; ++s) {
        const uint32_t j = item_of[s];
        if (j >= n || slot_of[j] != UINT32_MAX) return false;
        slot_of[j] = uint32_t(s);
    }
    update_norms(*this);
    // The ranking's copy: fp16 halves the bytes a query reads, and those bytes are its cost
    // (4,096 centroids of 258 FP32 values, 4.2 MB, took about 0.15 ms of a 0.18 ms search of 16
    // cells at 1,000,000 items; four FMA chains instead of one changed nothing: memory-bound).
    float largest = 0.0f;
    for (float v : centroids) largest = std::max(largest, std::fabs(v));
    centroid_scale = 1.0f;
    while (largest * centroid_scale > 16384.0f) centroid_scale *= 0.5f;
    centroids16.resize(centroids.size());
    for (size_t i = 0; i < centroids.size(); ++i)
        centroids16[i] = encode16(AnnVectors::kFp16, centroids[i] * centroid_scale);
    return true;
}

size_t IvfCells::memory_bytes() const {
    return vectors.size() + (item_of.size() + slot_of.size()) * sizeof(uint32_t) +
           offsets.size() * sizeof(uint64_t) +
           (centroids.size() + centroid_norms.size()) * sizeof(float) +
           centroids16.size() * sizeof(uint16_t);
}

IvfCells IvfCells::build(const char* stored, size_t n, size_t item_bytes, uint32_t dims,
                         uint32_t cells, const Decode& decode, int threads) {
    // OpenBLAS's OpenMP build follows omp_get_max_threads() at each call.
    struct Threads {
        int before = omp_get_max_threads();
        explicit Threads(int t) {
            if (t > 0) omp_set_num_threads(t);
        }
        ~Threads() { omp_set_num_threads(before); }
    } scoped(threads);
    IvfCells m;
    m.dims = dims;
    m.item_bytes = item_bytes;
    m.cells = uint32_t(std::min<uint64_t>(std::max<uint32_t>(cells, 1), n));
    if (n == 0) m.cells = 0;
    std::vector<uint32_t> cell_of(n, 0);
    if (m.cells > 1) {
        // The sample: the first S of a fixed shuffle of the items, read in item order.
        std::vector<uint32_t> perm(n);
        std::iota(perm.begin(), perm.end(), 0u);
        uint64_t seed = kSeed;
        const size_t S = std::min(n, kSamplePerCell * m.cells);
        for (size_t i = 0; i < S; ++i) {
            const size_t j = i + size_t(splitmix(seed) % (n - i));
            std::swap(perm[i], perm[j]);
        }
        std::vector<uint32_t> sample(perm.begin(), perm.begin() + std::ptrdiff_t(S));
        std::sort(sample.begin(), sample.end());
        std::vector<float> x(S * dims);
        for (size_t i = 0; i < S; ++i) decode(sample[i], x.data() + i * dims);
        m.centroids.resize(size_t(m.cells) * dims);
        seed_centroids(x.data(), S, dims, m.cells, seed, m.centroids.data());

        std::vector<uint32_t> assigned(S);
        std::vector<float> dist(S), g;
        std::vector<double> sums(size_t(m.cells) * dims);
        std::vector<uint64_t> counts(m.cells);
        for (uint32_t it = 0; it < kIterations; ++it) {
            update_norms(m);
            for (size_t r = 0; r < S; r += kBlock) {
                const size_t rows = std::min(kBlock, S - r);
                nearest(x.data() + r * dims, rows, m, g, assigned.data() + r, dist.data() + r);
            }
            // Each centroid the mean of its items, summed in item order.
            std::fill(sums.begin(), sums.end(), 0.0);
            std::fill(counts.begin(), counts.end(), 0);
            for (size_t i = 0; i < S; ++i) {
                double* s = sums.data() + size_t(assigned[i]) * dims;
                const float* xi = x.data() + i * dims;
                for (size_t q = 0; q < dims; ++q) s[q] += xi[q];
                ++counts[assigned[i]];
            }
            for (size_t c = 0; c < m.cells; ++c) {
                if (counts[c] == 0) continue;
                for (size_t q = 0; q < dims; ++q)
                    m.centroids[c * dims + q] = float(sums[c * dims + q] / double(counts[c]));
            }
            // An empty cell takes the item farthest from its centroid in the largest cell.
            for (size_t c = 0; c < m.cells; ++c) {
                if (counts[c] != 0) continue;
                const size_t largest =
                    size_t(std::max_element(counts.begin(), counts.end()) - counts.begin());
                size_t far = S;
                for (size_t i = 0; i < S; ++i) {
                    if (assigned[i] == largest && (far == S || dist[i] > dist[far])) far = i;
                }
                if (far == S || counts[largest] < 2) break;
                std::copy_n(x.data() + far * dims, dims, m.centroids.data() + c * dims);
                assigned[far] = uint32_t(c);
                dist[far] = 0.0f;
                --counts[largest];
                counts[c] = 1;
            }
        }
        update_norms(m);
        // Every item to its nearest centroid.
        std::vector<float> block(kBlock * dims);
        for (size_t r = 0; r < n; r += kBlock) {
            const size_t rows = std::min(kBlock, n - r);
            for (size_t i = 0; i < rows; ++i) decode(r + i, block.data() + i * dims);
            nearest(block.data(), rows, m, g, cell_of.data() + r, nullptr);
        }
    } else if (m.cells == 1) {
        // One cell: its centroid is the mean (what the search compares does not matter).
        m.centroids.assign(dims, 0.0f);
    }
    // The cells' slots: each cell's items in item order.
    m.offsets.assign(size_t(m.cells) + 1, 0);
    for (size_t j = 0; j < n; ++j) ++m.offsets[size_t(cell_of[j]) + 1];
    for (size_t c = 0; c < m.cells; ++c) m.offsets[c + 1] += m.offsets[c];
    std::vector<uint64_t> next(m.offsets.begin(), m.offsets.end() - 1);
    m.item_of.resize(n);
    m.vectors.resize(n * item_bytes);
    for (size_t j = 0; j < n; ++j) {
        const uint64_t s = next[cell_of[j]]++;
        m.item_of[s] = uint32_t(j);
        std::memcpy(m.vectors.data() + s * item_bytes, stored + j * item_bytes, item_bytes);
    }
    m.finish();
    return m;
}

void IvfCells::search(const float* q, const void* stored_q, AnnDistance distance, const void* param,
                      uint32_t probe, size_t fetch, std::vector<int64_t>& ids,
                      std::vector<std::pair<float, uint32_t>>& order,
                      std::vector<std::pair<float, uint32_t>>& heap) const {
    ids.clear();
    fetch = std::min(fetch, items());
    if (fetch == 0 || cells == 0) return;
    // The cells by the query's distance to their centroids (|c|^2 - 2 q . c: |q|^2 is common).
    order.resize(cells);
    const float unscale = 2.0f / centroid_scale;
    for (size_t c = 0; c < cells; ++c) {
        const float dot = dot_fp16(q, centroids16.data() + c * dims, dims);
        order[c] = {centroid_norms[c] - unscale * dot, uint32_t(c)};
    }
    const size_t first = std::min<size_t>(std::max<uint32_t>(probe, 1), cells);
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(first), order.end());
    size_t sorted = first;  // order[0, sorted) is in order
    // The `fetch` nearest items: a max-heap of (distance, item), the worst on top.
    heap.clear();
    size_t seen = 0;
    for (size_t i = 0; i < cells; ++i) {
        if (i >= first && seen >= fetch) break;
        if (i == sorted) {
            // The probed cells held fewer than `fetch` items: twice as many cells in order. (Not
            // all of them: sorting 4,096 took a search of 8 cells from 0.12 to 0.30 ms when
            // its cells were small.)
            const size_t more = std::min<size_t>(cells, 2 * sorted);
            std::partial_sort(order.begin() + std::ptrdiff_t(sorted),
                              order.begin() + std::ptrdiff_t(more), order.end());
            sorted = more;
        }
        const uint32_t c = order[i].second;
        for (uint64_t s = offsets[c]; s < offsets[c + 1]; ++s) {
            const std::pair<float, uint32_t> e{
                distance(stored_q, vectors.data() + s * item_bytes, param), item_of[s]};
            if (heap.size() < fetch) {
                heap.push_back(e);
                std::push_heap(heap.begin(), heap.end());
            } else if (e < heap.front()) {
                std::pop_heap(heap.begin(), heap.end());
                heap.back() = e;
                std::push_heap(heap.begin(), heap.end());
            }
        }
        seen += size_t(offsets[c + 1] - offsets[c]);
    }
    std::sort_heap(heap.begin(), heap.end());
    ids.resize(heap.size());
    for (size_t i = 0; i < heap.size(); ++i) ids[i] = int64_t(heap[i].second);
}

}  // namespace sparsenet::engine
