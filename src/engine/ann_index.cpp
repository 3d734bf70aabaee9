// ANN index (ann_index.h): build and load by kind (ivf and flat: k-means cells, ann_ivf.h;
// hnsw: hnswlib's graph, ann_hnsw.h), the item vectors, the search behind the index, and the
// exact re-ranking. The file's layout and reader: ann_file.h.
#include "engine/ann_index.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <thread>

#include "engine/ann_file.h"
#include "engine/ann_hnsw.h"
#include "engine/ann_ivf.h"
#include "engine/output_fingerprint.h"
#include "engine/output_screen.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"

namespace sparsenet::engine {

namespace {

DenseOutputEdge checked_edge(const Network& network, int output, const std::string& what) {
    DenseOutputEdge edge = dense_output_edge(network, output);
    if (!edge.unsupported.empty()) {
        throw Error(ErrorCategory::kUsage,
                    what + ": " + edge.unsupported +
                        " (an ANN index needs an output layer with one dense source and an "
                        "element-wise monotone activation or SoftMax, whose scores rank as inner "
                        "products)");
    }
    if (network.device() != "cpu") {
        throw Error(ErrorCategory::kUsage, what +
                                               ": an ANN index serves from the CPU backend; "
                                               "the model was loaded on '" +
                                               network.device() + "' (use device \"cpu\")");
    }
    return edge;
}

}  // namespace

ItemVectors::ItemVectors(uint32_t n, uint32_t k, AnnVectors vectors, uint32_t dims,
                         std::string what)
    : n_(n),
      k_(k),
      vectors_(vectors),
      dims_(dims),
      what_(std::move(what)),
      item_bytes_(ann_vector_bytes(vectors, k)),
      halves_(ann_halves(k)),
      bytes_(size_t(n) * item_bytes_, 0) {}

void ItemVectors::add_rows(uint64_t first, uint64_t rows, const float* values, size_t ld) {
    constexpr size_t kItems = 64;  // items written together, rows read in cache lines
    for (size_t j0 = 0; j0 < n_; j0 += kItems) {
        const size_t b = std::min(kItems, size_t(n_) - j0);
        for (size_t r = 0; r < rows; ++r) {
            const float* row = values + r * ld + j0;
            for (size_t i = 0; i < b; ++i) set(j0 + i, size_t(first + r), row[i]);
        }
    }
    rows_seen_ += rows;
}

void ItemVectors::add_item(size_t j, const float* w) {
    for (size_t q = 0; q < k_; ++q) set(j, q, w[q]);
}

std::vector<char> ItemVectors::finish(const float* bias, float* radius) {
    const bool half = vectors_ != AnnVectors::kFp32;
    std::vector<float> x(dims_);
    std::vector<double> norms(n_);
    double r2 = 0.0;
    for (size_t j = 0; j < n_; ++j) {
        const char* v = bytes_.data() + j * item_bytes_;
        if (half) {
            decode_stored(v, vectors_, uint32_t(k_), x.data());  // the rounded weights
        } else {
            std::memcpy(x.data(), v, k_ * sizeof(float));
        }
        x[k_] = bias[j];
        double sum = 0.0;
        for (size_t q = 0; q <= k_; ++q) sum += double(x[q]) * x[q];
        norms[j] = sum;
        r2 = std::max(r2, sum);
    }
    for (size_t j = 0; j < n_; ++j) {
        const float tail[2] = {bias[j], float(std::sqrt(std::max(0.0, r2 - norms[j])))};
        char* v = bytes_.data() + j * item_bytes_;
        std::memcpy(v + (half ? halves_ * sizeof(uint16_t) : k_ * sizeof(float)), tail,
                    sizeof tail);
    }
    *radius = float(std::sqrt(r2));
    return std::move(bytes_);
}

void ItemVectors::set(size_t j, size_t q, float w) {
    char* v = bytes_.data() + j * item_bytes_;
    if (vectors_ == AnnVectors::kFp32) {
        std::memcpy(v + q * sizeof(float), &w, sizeof w);
        return;
    }
    const uint16_t h = encode16(vectors_, w);
    if (!std::isfinite(decode16(vectors_, h)) && std::isfinite(w)) {
        throw Error(ErrorCategory::kUsage, what_ + ": item " + std::to_string(j) +
                                               " has the value " + std::to_string(w) + ", beyond " +
                                               to_string(vectors_) +
                                               "'s range (use --vectors bf16 or fp32)");
    }
    std::memcpy(v + q * sizeof(uint16_t), &h, sizeof h);
}

namespace {

std::vector<char> item_vectors(const DenseOutputEdge& e, AnnVectors vectors, uint32_t dims,
                               float* radius, const std::string& what) {
    ItemVectors iv(e.n, e.k, vectors, dims, what);
    if (e.transposed) {  // stored [n, k]: item j's weights are row j
        for (size_t j = 0; j < e.n; ++j) iv.add_item(j, e.stored + j * e.ld);
    } else {
        iv.add_rows(0, e.k, e.stored, e.ld);
    }
    return iv.finish(e.bias, radius);
}

std::string hex(uint64_t v) {
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

bool AnnIndex::holds_vectors(const std::string& path) {
    return ann_file_holds_vectors(path);
}

uint64_t output_fingerprint(const DenseOutputEdge& e) {
    if (e.stored == nullptr) {  // never kept by a streamed load: the fingerprint it computed
        if (e.released_fingerprint == 0) {
            throw Error(ErrorCategory::kUsage, e.weight_name + ": the output matrix was released");
        }
        return e.released_fingerprint;
    }
    OutputFingerprint f(e.n, e.k, e.transposed,
                        e.logits ? Activation::kSoftMax : e.activation.kind);
    f.add_rows(e.stored, e.transposed ? e.n : e.k, e.transposed ? e.k : e.n, e.ld);
    return f.finish(e.bias, e.n);
}

// ---- the index ----

struct AnnIndex::Impl {
    std::string path, layer;
    AnnKind kind = AnnKind::kIvf;
    uint64_t items = 0;
    uint32_t width = 0, dims = 0, links = 0, probe = 0;
    uint64_t fingerprint = 0;
    float radius = 0.0f;
    AnnVectors vectors = AnnVectors::kFp32;
    StoredDistance distance;
    size_t index_bytes = 0;
    std::unique_ptr<HnswGraph> graph;  // kind hnsw
    // Kinds ivf and flat: the cells and their vectors (flat: one cell, scanned whole; not
    // hnswlib's BruteforceSearch, which reads each item's 8-byte label at the vector's end
    // unaligned when 16-bit vectors take 4 bytes modulo 8: undefined behaviour, found by
    // fuzz_ann).
    IvfCells ivf;
    const char* stored(uint32_t j) const {  // item j's vector, as stored
        return graph ? graph->stored(j) : ivf.stored(j);
    }
};

bool AnnIndex::available(AnnKind kind) {
    return kind != AnnKind::kHnsw || HnswGraph::available();
}

const char* AnnIndex::kinds() {
    return "ivf, hnsw, flat";
}

const char* to_string(AnnKind kind) {
    switch (kind) {
        case AnnKind::kIvf:
            return "ivf";
        case AnnKind::kHnsw:
            return "hnsw";
        case AnnKind::kFlat:
            return "flat";
    }
    return "?";
}

AnnKind parse_ann_kind(const std::string& name, const std::string& what) {
    for (AnnKind k : {AnnKind::kIvf, AnnKind::kHnsw, AnnKind::kFlat}) {
        if (name == to_string(k)) return k;
    }
    throw Error(ErrorCategory::kUsage,
                what + " '" + name + "': expected one of " + std::string(AnnIndex::kinds()));
}

namespace {

// The default accuracy knob of kind ivf: the cells a query scans, 1/32 of them (at least 8).
// At 27,278 items (512 cells) scanning 1/16 gave recall@100 0.94 on a model trained on
// generated data, 1/8 0.99 (docs/benchmarks-ann.md, "ANN index: cells against the graph").
uint32_t ivf_default_probe(uint32_t cells) {
    return std::min(cells, std::max<uint32_t>(8, cells / 32));
}

}  // namespace

AnnBuildReport AnnIndex::build(const Network& network, int output, const std::string& model_path,
                               const AnnBuildOptions& o, const std::string& out_path,
                               ItemVectors* streamed) {
    const DenseOutputEdge edge = checked_edge(network, output, model_path);
    const AnnKind kind = parse_ann_kind(o.kind, "--kind");
    AnnBuildReport report;
    report.kind = to_string(kind);
    report.items = edge.n;
    report.width = edge.k;
    const AnnVectors vectors = parse_ann_vectors(o.vectors);
    report.vectors = to_string(vectors);
    const uint32_t dims = ann_dims(edge.k, vectors);
    const size_t item_bytes = ann_vector_bytes(vectors, edge.k);
    uint32_t probe = o.probe;
    if (kind == AnnKind::kHnsw) {
        HnswGraph::require(out_path);
        if (o.hnsw_m < 2 || o.hnsw_m > 256) {
            throw Error(ErrorCategory::kUsage, "--hnsw-m " + std::to_string(o.hnsw_m) +
                                                   ": expected 2 to 256 links per node");
        }
        if (o.ef_construction < 1) {
            throw Error(ErrorCategory::kUsage, "--ef-construction 0: expected 1 or more");
        }
        report.links = o.hnsw_m;
        if (!probe) probe = 128;
    } else if (kind == AnnKind::kIvf) {
        if (o.cells > edge.n && edge.n > 0) {
            throw Error(ErrorCategory::kUsage, "--cells " + std::to_string(o.cells) +
                                                   ": expected at most the " +
                                                   std::to_string(edge.n) + " items");
        }
        report.cells = o.cells ? o.cells : ivf_default_cells(edge.n);
        if (!probe) probe = ivf_default_probe(report.cells);
        if (probe > report.cells && report.cells > 0) {
            throw Error(ErrorCategory::kUsage,
                        "--probe " + std::to_string(probe) + ": expected at most the " +
                            std::to_string(report.cells) + " cells (--cells)");
        }
    }
    report.probe = probe;
    report.fingerprint = output_fingerprint(edge);

    const int threads =
        o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    const auto start = std::chrono::steady_clock::now();
    float radius = 0.0f;
    const auto vectors_of = [&] {
        if (streamed == nullptr) return item_vectors(edge, vectors, dims, &radius, model_path);
        if (streamed->rows_seen() != edge.k) {
            throw Error(ErrorCategory::kInternal, model_path + ": the streamed load gave " +
                                                      std::to_string(streamed->rows_seen()) +
                                                      " rows of " + std::to_string(edge.k));
        }
        return streamed->finish(edge.bias, &radius);
    };
    std::string blob;  // hnsw: the graph's file
    IvfCells cells;    // ivf
    if (kind == AnnKind::kHnsw) {
        const std::vector<char> x = vectors_of();
        blob = HnswGraph::build(x.data(), edge.n, vectors, edge.k, o.hnsw_m, o.ef_construction,
                                threads, out_path);
    } else if (kind == AnnKind::kIvf) {
        const std::vector<char> x = vectors_of();
        cells = IvfCells::build(
            x.data(), edge.n, item_bytes, edge.k + 2, report.cells,
            [&](size_t j, float* dst) {
                decode_stored(x.data() + j * item_bytes, vectors, edge.k, dst);
            },
            threads);
        report.cells = cells.cells;
    } else {
        // The radius (and the range check); the vectors are rebuilt when loading.
        vectors_of();
    }
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report.index_bytes = kind == AnnKind::kFlat  ? uint64_t(edge.n) * item_bytes
                         : kind == AnnKind::kIvf ? cells.memory_bytes()
                                                 : blob.size();

    std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCategory::kIo, out_path + ": cannot open for writing (-o)");
    AnnHeader h;
    h.version = kind == AnnKind::kIvf ? kAnnVersion : kAnnVersionWithoutCells;
    h.kind = to_string(kind);
    h.layer = layer_views(network).at(size_t(output)).name;
    h.model_path = model_path;
    h.items = edge.n;
    h.width = edge.k;
    h.dims = dims;
    h.fingerprint = report.fingerprint;
    h.radius = radius;
    h.links = report.links;
    h.probe = probe;
    h.vectors = vectors;
    h.bytes = kind == AnnKind::kIvf ? cells_bytes(cells) : blob.size();
    write_header(out, h);
    if (kind == AnnKind::kIvf) {
        write_cells(out, cells);
    } else {
        out.write(blob.data(), std::streamsize(blob.size()));
    }
    out.flush();
    if (!out) throw Error(ErrorCategory::kIo, out_path + ": write failed (disk full?)");
    report.file_bytes = uint64_t(out.tellp());
    return report;
}

AnnIndex::AnnIndex(const std::string& path, const Network& network, int output,
                   const std::string& model_path)
    : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    m.path = path;
    AnnReader r(path);
    const AnnHeader h = r.header();
    m.layer = h.layer;
    m.items = h.items;
    m.width = h.width;
    m.dims = h.dims;
    m.fingerprint = h.fingerprint;
    m.radius = h.radius;
    m.links = h.links;
    m.probe = h.probe;
    m.vectors = h.vectors;

    const DenseOutputEdge edge = checked_edge(network, output, model_path);
    const std::string layer = layer_views(network).at(size_t(output)).name;
    const uint64_t fingerprint = output_fingerprint(edge);
    if (m.layer != layer || m.items != edge.n || m.width != edge.k ||
        m.fingerprint != fingerprint) {
        throw Error(ErrorCategory::kData,
                    path + ": this ANN index was built from another model (" + h.model_path +
                        ": layer '" + m.layer + "', " + std::to_string(m.items) + " items x " +
                        std::to_string(m.width) + " units, weights fingerprint " +
                        hex(m.fingerprint) + "); " + model_path + " has layer '" + layer + "', " +
                        std::to_string(edge.n) + " items x " + std::to_string(edge.k) +
                        " units, fingerprint " + hex(fingerprint) +
                        "; rebuild it: sparsenet ann-index -n " + model_path + " -o " + path);
    }
    const bool known = h.kind == to_string(AnnKind::kHnsw) || h.kind == to_string(AnnKind::kFlat) ||
                       (h.kind == to_string(AnnKind::kIvf) && h.version >= kAnnVersionWithCells);
    if (m.dims != ann_dims(m.width, m.vectors) || !known) {
        throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (kind '" + h.kind + "', " +
                                            std::to_string(m.dims) + " dimensions for " +
                                            std::to_string(m.width) + " units)");
    }
    m.kind = parse_ann_kind(h.kind, "kind");
    std::ifstream& in = r.stream();
    const uint64_t header = uint64_t(in.tellg());
    in.seekg(0, std::ios::end);
    const uint64_t total = uint64_t(in.tellg());
    if (total != header + h.bytes) {
        throw Error(ErrorCategory::kIo,
                    path + ": " + (total < header + h.bytes ? "truncated" : "corrupt") +
                        " ANN index (" + std::to_string(total) + " bytes; its header announces " +
                        std::to_string(header + h.bytes) +
                        "); rebuild it with `sparsenet ann-index`");
    }
    in.seekg(std::streamoff(header));
    m.distance = stored_distance(m.vectors, m.width);
    const size_t item_bytes = ann_vector_bytes(m.vectors, m.width);
    if (m.kind == AnnKind::kFlat) {
        float radius = 0.0f;
        const std::vector<char> x = item_vectors(edge, m.vectors, m.dims, &radius, path);
        m.ivf = IvfCells::build(
            x.data(), edge.n, item_bytes, m.width + 2, 1, [&](size_t j, float* dst) {
                decode_stored(x.data() + j * item_bytes, m.vectors, m.width, dst);
            });
        m.index_bytes = m.ivf.memory_bytes();
    } else if (m.kind == AnnKind::kIvf) {
        m.ivf = read_cells(r, m.items, m.width + 2, item_bytes);
        if (cells_bytes(m.ivf) != h.bytes) {
            throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (its cells take " +
                                                std::to_string(cells_bytes(m.ivf)) +
                                                " bytes; its header announces " +
                                                std::to_string(h.bytes) + ")");
        }
        m.index_bytes = m.ivf.memory_bytes();
    } else {
        m.graph = std::make_unique<HnswGraph>(r, h.bytes, m.vectors, m.width, m.items);
        m.graph->set_ef(m.probe);
        m.index_bytes = m.graph->memory_bytes();
    }
}

void AnnIndex::item_row(uint32_t j, float* dst) const {
    const Impl& m = *impl_;
    const char* v = m.stored(j);
    if (m.vectors == AnnVectors::kFp32) {
        std::memcpy(dst, v, m.width * sizeof(float));
    } else {
        decode16(m.vectors, reinterpret_cast<const uint16_t*>(v), m.width, dst);
    }
}

float AnnIndex::item_bias(uint32_t j) const {
    const Impl& m = *impl_;
    const char* v = m.stored(j);
    if (m.vectors == AnnVectors::kFp32) {
        float b;
        std::memcpy(&b, v + m.width * sizeof(float), sizeof b);
        return b;
    }
    float b;
    std::memcpy(&b, v + ann_halves(m.width) * sizeof(uint16_t), sizeof b);
    return b;
}

void AnnIndex::set_probe(uint32_t probe) {
    if (probe == 0) return;
    impl_->probe = probe;
    if (impl_->graph) impl_->graph->set_ef(probe);
}

size_t AnnIndex::memory_bytes() const {
    return impl_->index_bytes;
}

void AnnIndex::search(const float* h, size_t fetch, std::vector<int64_t>& ids,
                      std::vector<float>& scratch) const {
    const Impl& m = *impl_;
    fetch = std::min<size_t>(fetch, m.items);
    ids.clear();
    if (fetch == 0) return;
    // [h, 1, 0...]; for 16-bit vectors also its encoding, after it (no float is overwritten).
    const bool half = m.vectors != AnnVectors::kFp32;
    const size_t halves = ann_halves(m.width);
    scratch.assign(m.dims + (half ? halves / 2 + 2 : 0), 0.0f);
    std::copy_n(h, m.width, scratch.begin());
    scratch[m.width] = 1.0f;
    const void* query = scratch.data();
    if (half) {
        // The query in the vectors' layout: h in 16 bits, then 1 and 0 in FP32. Scaling [h, 1]
        // by c > 0 keeps the order (|cq - x|^2 = c^2 |q|^2 + R^2 - 2c q.v): an h beyond fp16's
        // range is scaled into it.
        float largest = 0.0f;
        for (uint32_t q = 0; q < m.width; ++q) largest = std::max(largest, std::fabs(h[q]));
        const float scale =
            m.vectors == AnnVectors::kFp16 && largest > 16384.0f ? 16384.0f / largest : 1.0f;
        auto* encoded = reinterpret_cast<uint16_t*>(scratch.data() + m.dims);
        for (uint32_t q = 0; q < m.width; ++q) encoded[q] = encode16(m.vectors, h[q] * scale);
        const float tail[2] = {scale, 0.0f};
        std::memcpy(encoded + halves, tail, sizeof tail);
        query = encoded;
    }
    if (m.graph) {
        m.graph->search(query, fetch, ids);
        return;
    }
    thread_local std::vector<std::pair<float, uint32_t>> order, heap;
    m.ivf.search(scratch.data(), query, m.distance.func, &m.distance.param, m.probe, fetch, ids,
                 order, heap);
}

AnnIndex::~AnnIndex() = default;
AnnKind AnnIndex::kind() const {
    return impl_->kind;
}
AnnVectors AnnIndex::vectors() const {
    return impl_->vectors;
}
const std::string& AnnIndex::path() const {
    return impl_->path;
}
uint64_t AnnIndex::items() const {
    return impl_->items;
}
uint32_t AnnIndex::probe() const {
    return impl_->probe;
}

// ---- exact re-ranking ----

AnnRanker::AnnRanker(const Network& network, int output, const AnnIndex* index)
    : edge_(checked_edge(network, output, "ANN index")), index_(index) {
    const size_t n = edge_.n, k = edge_.k;
    if (index_) return;
    if (edge_.transposed && edge_.ld == k) {
        item_rows_ = edge_.stored;
    } else {
        rows_.resize(n * k);
        for (size_t q = 0; q < k; ++q) {
            for (size_t j = 0; j < n; ++j) {
                rows_[j * k + q] = edge_.transposed ? edge_.stored[j * edge_.ld + q]
                                                    : edge_.stored[q * edge_.ld + j];
            }
        }
        item_rows_ = rows_.data();
    }
    bias_.assign(edge_.bias, edge_.bias + n);
}

void AnnRanker::rank(Backend& be, const float* h, const std::vector<uint32_t>& candidates,
                     uint32_t k, Scratch& s, float* out_scores, uint32_t* out_ids) const {
    rank_candidates(
        be, h, edge_.k, edge_.transposed, edge_.activation, candidates.data(), candidates.size(), k,
        [this](uint32_t id, float* dst) { row(id, dst); }, [this](uint32_t id) { return bias(id); },
        s, out_scores, out_ids);
}

void AnnRanker::rank_all(Backend& be, const float* h, const std::vector<uint32_t>& excluded,
                         uint32_t k, Scratch& s, float* out_scores, uint32_t* out_ids) const {
    constexpr size_t kChunk = size_t(1) << 16;
    const size_t n = edge_.n;
    std::vector<std::pair<float, uint32_t>> best;  // (score desc, id asc), at most k
    std::vector<uint32_t> chunk;
    std::vector<float> scores(k);
    std::vector<uint32_t> ids(k);
    auto before = [](const std::pair<float, uint32_t>& a, const std::pair<float, uint32_t>& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t e = 0;
    for (size_t first = 0; first < n; first += kChunk) {
        chunk.clear();
        for (size_t j = first; j < std::min(n, first + kChunk); ++j) {
            while (e < excluded.size() && excluded[e] < j) ++e;
            if (e < excluded.size() && excluded[e] == j) continue;
            chunk.push_back(uint32_t(j));
        }
        if (chunk.empty()) continue;
        rank(be, h, chunk, k, s, scores.data(), ids.data());
        for (size_t i = 0; i < k && ids[i] != UINT32_MAX; ++i) best.emplace_back(scores[i], ids[i]);
        std::sort(best.begin(), best.end(), before);
        if (best.size() > k) best.resize(k);
    }
    for (size_t i = 0; i < k; ++i) {
        out_scores[i] = i < best.size() ? best[i].first : -std::numeric_limits<float>::infinity();
        out_ids[i] = i < best.size() ? best[i].second : UINT32_MAX;
    }
}

}  // namespace sparsenet::engine

namespace sparsenet {

bool ann_index_available(const std::string& kind) {
    return engine::AnnIndex::available(engine::parse_ann_kind(kind, "kind"));
}

AnnIndexReport build_ann_index(const std::string& model_path, const std::string& out_path,
                               const AnnIndexOptions& options) {
    const engine::AnnVectors vectors = engine::parse_ann_vectors(options.vectors);
    NetworkOptions net_options;
    net_options.device = "cpu";
    net_options.comm = CommKind::kLocal;
    // The build needs the output matrix only as item vectors, and no input layer: both are read
    // so (a streamed load), never held as FP32 matrices beside the vectors. Blocks of 512 MB:
    // each pass writes a dozen or more of every item's weights (10,000,000 items: 13 rows).
    std::unique_ptr<engine::ItemVectors> streamed;
    net_options.load.drop_input_weights = true;
    net_options.load.release_output = true;
    net_options.load.output_layer = options.output_layer;
    net_options.load.chunk_floats = size_t(1) << 27;
    net_options.load.output_rows = [&](uint64_t first, uint64_t rows, uint64_t total, uint32_t cols,
                                       const float* values) {
        if (!streamed) {
            streamed = std::make_unique<engine::ItemVectors>(
                cols, uint32_t(total), vectors, engine::ann_dims(uint32_t(total), vectors),
                model_path);
        }
        streamed->add_rows(first, rows, values, cols);
    };
    const Network network = Network::load(model_path, net_options);
    const std::vector<engine::LayerView> layers = engine::layer_views(network);
    int output = -1;
    for (size_t l = 0; l < layers.size() && output < 0; ++l) {
        const bool match = options.output_layer.empty() ? layers[l].output
                                                        : layers[l].name == options.output_layer;
        if (match && !layers[l].input) output = int(l);
    }
    if (output < 0) {
        throw Error(ErrorCategory::kUsage,
                    model_path + ": " +
                        (options.output_layer.empty()
                             ? std::string("the network has no Output layer")
                             : "no non-input layer '" + options.output_layer + "' (--layer)"));
    }
    // Another layer than the one released (or none: tied weights) reads the network's matrix.
    if (streamed && engine::dense_output_edge(network, output).stored == nullptr) {
        return engine::AnnIndex::build(network, output, model_path, options, out_path,
                                       streamed.get());
    }
    return engine::AnnIndex::build(network, output, model_path, options, out_path);
}

}  // namespace sparsenet
