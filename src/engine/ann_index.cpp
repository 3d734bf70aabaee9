// ANN index (ann_index.h): the file, the search behind it (k-means cells, ann_ivf.h, or hnswlib's
// graph), and the exact re-ranking.
//
// File layout (host byte order, little-endian on every supported machine):
//   "sparsenet-ann\n" + 2 zero bytes   magic, 16 bytes
//   u32 version (2; files of version 1 still load: their vectors are FP32)
//   str kind, str output layer, str model path (as given when built; informational)
//   u64 items, u32 width (source units), u32 dims (of the stored vectors), u64 fingerprint,
//   f32 radius R, u32 links (hnsw M), u32 probe (efSearch)
//   version 2: str vectors ("fp32", "fp16" or "bf16": how each stored value is encoded)
//   u64 bytes, then that many bytes: the hnswlib graph (HierarchicalNSW::saveIndex's file);
//   for kind ivf (version 3) the cells and their vectors (write_cells); none for kind flat,
//   whose vectors are the model's own, recomputed (and rounded) when loading
// str: u32 length, then the bytes. dims: FP32 vectors width + 2 rounded up to 16 (hnswlib's
// AVX kernels take whole blocks of 16); 16-bit ones width + 2: the width weights in 16 bits
// (padded to an even count), then the bias and the augmentation in FP32. (Rounding those two
// quantises the narrow band of norms the augmentation works in, b near its initial value and
// sqrt(R^2 - |v|^2) with it, into a few shells that a graph search cannot cross: recall@100
// fell from 0.97 to 0.21 at efSearch 256 on a briefly trained model with every b near -4.)
// The fingerprint is always that of the model's FP32 weights and biases.
#include "engine/ann_index.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <thread>

#include "engine/ann_ivf.h"
#include "engine/output_fingerprint.h"
#include "engine/output_screen.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"

#if defined(SPARSENET_WITH_ANN)
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <unordered_map>

#include <hnswlib/hnswlib.h>
#endif

namespace sparsenet::engine {

namespace {

constexpr char kMagic[16] = {'s', 'p', 'a', 'r', 's', 'e',  'n', 'e',
                             't', '-', 'a', 'n', 'n', '\n', 0,   0};
// Version 3 files hold kind ivf (unknown to version 2 readers); hnsw and flat files are still
// written as version 2, which every reader since 16-bit vectors takes.
constexpr uint32_t kVersion = 3;
constexpr uint32_t kVersionWithoutCells = 2;

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

#if defined(SPARSENET_WITH_ANN)
// 16-bit vectors: the weights' 16-bit values, padded to an even count (the FP32 tail aligned).
size_t halves_for(uint32_t width) {
    return (size_t(width) + 1) / 2 * 2;
}
// Bytes of one stored vector (the file's layout above).
size_t vector_bytes(AnnVectors vectors, uint32_t width, uint32_t dims) {
    return vectors == AnnVectors::kFp32 ? size_t(dims) * sizeof(float)
                                        : halves_for(width) * sizeof(uint16_t) + 2 * sizeof(float);
}

// Item j's stored vector decoded: its width weights as floats (defined below).
void decode_stored(const char* v, AnnVectors vectors, uint32_t width, float* dst);

}  // namespace

ItemVectors::ItemVectors(uint32_t n, uint32_t k, AnnVectors vectors, uint32_t dims,
                         std::string what)
    : n_(n),
      k_(k),
      vectors_(vectors),
      dims_(dims),
      what_(std::move(what)),
      item_bytes_(vector_bytes(vectors, k, dims)),
      halves_(halves_for(k)),
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

void put_u32(std::ostream& o, uint32_t v) {
    o.write(reinterpret_cast<const char*>(&v), 4);
}
void put_u64(std::ostream& o, uint64_t v) {
    o.write(reinterpret_cast<const char*>(&v), 8);
}
void put_str(std::ostream& o, const std::string& s) {
    put_u32(o, uint32_t(s.size()));
    o.write(s.data(), std::streamsize(s.size()));
}

// Reads the file's fields, throwing Error(kIo) naming it at the first that is missing.
struct Reader {
    std::ifstream in;
    std::string path;
    void get(void* p, size_t bytes, const char* field) {
        in.read(static_cast<char*>(p), std::streamsize(bytes));
        if (size_t(in.gcount()) != bytes) {
            throw Error(ErrorCategory::kIo, path + ": truncated ANN index (ends in its " + field +
                                                "); rebuild it with `sparsenet ann-index`");
        }
    }
    uint32_t u32(const char* field) {
        uint32_t v;
        get(&v, 4, field);
        return v;
    }
    uint64_t u64(const char* field) {
        uint64_t v;
        get(&v, 8, field);
        return v;
    }
    std::string str(const char* field) {
        const uint32_t size = u32(field);
        if (size > 65536) {
            throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (its " +
                                                std::string(field) + " claims " +
                                                std::to_string(size) + " bytes)");
        }
        std::string s(size, '\0');
        get(s.data(), size, field);
        return s;
    }
};

std::string hex(uint64_t v) {
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}
#endif  // SPARSENET_WITH_ANN

}  // namespace

bool AnnIndex::holds_vectors(const std::string& path) {
#if !defined(SPARSENET_WITH_ANN)
    (void)path;
    return false;
#else
    // The header up to the kind (the constructor checks the whole file and names its faults).
    Reader r{std::ifstream(path, std::ios::binary), path};
    char magic[sizeof kMagic] = {};
    r.in.read(magic, sizeof magic);
    if (!r.in || std::memcmp(magic, kMagic, sizeof magic) != 0) return false;
    try {
        const uint32_t version = r.u32("version");
        return version >= 1 && version <= kVersion && r.str("kind") != to_string(AnnKind::kFlat);
    } catch (const Error&) {
        return false;
    }
#endif
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
    size_t index_bytes = 0;
#if defined(SPARSENET_WITH_ANN)
    std::unique_ptr<hnswlib::SpaceInterface<float>> space;
    std::unique_ptr<hnswlib::AlgorithmInterface<float>> index;
    hnswlib::HierarchicalNSW<float>* graph = nullptr;  // index, when kind hnsw
    std::vector<uint32_t> internal;                    // hnsw: item -> the graph's own id
    // Kinds ivf and flat: the cells and their vectors (flat: one cell, scanned whole; not
    // hnswlib's BruteforceSearch, which reads each item's 8-byte label at the vector's end
    // unaligned when 16-bit vectors take 4 bytes modulo 8: undefined behaviour, found by
    // fuzz_ann).
    IvfCells ivf;
    const char* stored(uint32_t j) const {  // item j's vector, as stored
        if (graph) return graph->getDataByInternalId(internal[j]);
        return ivf.stored(j);
    }
#endif
};

bool AnnIndex::available() {
#if defined(SPARSENET_WITH_ANN)
    return true;
#else
    return false;
#endif
}

void ann_unavailable(const std::string& what) {
    throw Error(ErrorCategory::kUsage,
                what +
                    ": this sparsenet was built without ANN index support (CMake did not find "
                    "hnswlib: install libhnswlib-dev, scripts/install-deps, and configure with "
                    "-DSPARSENET_ANN=ON)");
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

#if !defined(SPARSENET_WITH_ANN)

AnnBuildReport AnnIndex::build(const Network&, int, const std::string&, const AnnBuildOptions&,
                               const std::string& out_path, ItemVectors*) {
    ann_unavailable(out_path);
}
AnnIndex::AnnIndex(const std::string& path, const Network&, int, const std::string&) {
    ann_unavailable(path);
}
void AnnIndex::set_probe(uint32_t) {}
void AnnIndex::search(const float*, size_t, std::vector<int64_t>& ids, std::vector<float>&) const {
    ids.clear();
}
size_t AnnIndex::memory_bytes() const {
    return 0;
}
void AnnIndex::item_row(uint32_t, float*) const {}
float AnnIndex::item_bias(uint32_t) const {
    return 0.0f;
}

#else

namespace {

// Values per stored vector: [w, b, augmentation], FP32 ones padded to a multiple of 16 (which
// hnswlib's AVX-512/AVX kernels take whole), 16-bit ones not (l2_fp16 and l2_bf16 take any count).
uint32_t dims_for(uint32_t width, AnnVectors vectors) {
    return vectors == AnnVectors::kFp32 ? (width + 2 + 15) / 16 * 16 : width + 2;
}

// hnswlib's L2 space over 16-bit weights (ann_vectors.h, widened on the fly) and an FP32 tail
// (the bias and the augmentation): the layout of vector_bytes.
class Space16 : public hnswlib::SpaceInterface<float> {
  public:
    Space16(AnnVectors vectors, uint32_t width)
        : halves_(halves_for(width)),
          func_(vectors == AnnVectors::kBf16 ? &distance<true> : &distance<false>) {}
    size_t get_data_size() override { return halves_ * sizeof(uint16_t) + 2 * sizeof(float); }
    hnswlib::DISTFUNC<float> get_dist_func() override { return func_; }
    void* get_dist_func_param() override { return &halves_; }

  private:
    template <bool kBf16>
    static float distance(const void* a, const void* b, const void* param) {
        const size_t halves = *static_cast<const size_t*>(param);
        const auto* x = static_cast<const uint16_t*>(a);
        const auto* y = static_cast<const uint16_t*>(b);
        const float head = kBf16 ? l2_bf16(x, y, halves) : l2_fp16(x, y, halves);
        float xt[2], yt[2];
        std::memcpy(xt, x + halves, sizeof xt);
        std::memcpy(yt, y + halves, sizeof yt);
        const float d0 = xt[0] - yt[0], d1 = xt[1] - yt[1];
        return head + d0 * d0 + d1 * d1;
    }
    size_t halves_;
    hnswlib::DISTFUNC<float> func_;
};

std::unique_ptr<hnswlib::SpaceInterface<float>> make_space(AnnVectors vectors, uint32_t width,
                                                           uint32_t dims) {
    if (vectors == AnnVectors::kFp32) return std::make_unique<hnswlib::L2Space>(dims);
    return std::make_unique<Space16>(vectors, width);
}

// Item vector `v` as stored, widened: [w, b, augmentation] (width + 2 FP32 values) into dst.
void decode_stored(const char* v, AnnVectors vectors, uint32_t width, float* dst) {
    if (vectors == AnnVectors::kFp32) {
        std::memcpy(dst, v, (size_t(width) + 2) * sizeof(float));
        return;
    }
    decode16(vectors, reinterpret_cast<const uint16_t*>(v), width, dst);
    std::memcpy(dst + width, v + halves_for(width) * sizeof(uint16_t), 2 * sizeof(float));
}

// The default accuracy knob of kind ivf: the cells a query scans, 1/32 of them (at least 8).
// At 27,278 items (512 cells) scanning 1/16 gave recall@100 0.94 on a model trained on
// generated data, 1/8 0.99 (docs/benchmarks.md, "ANN index: cells against the graph").
uint32_t ivf_default_probe(uint32_t cells) {
    return std::min(cells, std::max<uint32_t>(8, cells / 32));
}

// Kind ivf's part of the file, after the header's byte count: u32 cells, u32 dims,
// f32 centroids [cells, dims], u64 offsets [cells + 1], u32 item of each slot [items], then the
// stored vectors in slot order [items, vector bytes].
uint64_t cells_bytes(const IvfCells& c) {
    return 8 + c.centroids.size() * sizeof(float) + c.offsets.size() * sizeof(uint64_t) +
           c.item_of.size() * sizeof(uint32_t) + c.vectors.size();
}
void write_cells(std::ostream& o, const IvfCells& c) {
    put_u32(o, c.cells);
    put_u32(o, c.dims);
    o.write(reinterpret_cast<const char*>(c.centroids.data()),
            std::streamsize(c.centroids.size() * sizeof(float)));
    o.write(reinterpret_cast<const char*>(c.offsets.data()),
            std::streamsize(c.offsets.size() * sizeof(uint64_t)));
    o.write(reinterpret_cast<const char*>(c.item_of.data()),
            std::streamsize(c.item_of.size() * sizeof(uint32_t)));
    o.write(c.vectors.data(), std::streamsize(c.vectors.size()));
}

IvfCells read_cells(Reader& r, uint64_t items, uint32_t dims, size_t item_bytes) {
    IvfCells c;
    c.cells = r.u32("cell count");
    c.dims = r.u32("cell dimensions");
    if (c.dims != dims || c.cells > items || (items > 0 && c.cells == 0)) {
        throw Error(ErrorCategory::kIo, r.path + ": corrupt ANN index (" + std::to_string(c.cells) +
                                            " cells of " + std::to_string(c.dims) +
                                            " dimensions for " + std::to_string(items) + " items)");
    }
    c.item_bytes = item_bytes;
    c.centroids.resize(size_t(c.cells) * c.dims);
    r.get(c.centroids.data(), c.centroids.size() * sizeof(float), "centroids");
    c.offsets.resize(size_t(c.cells) + 1);
    r.get(c.offsets.data(), c.offsets.size() * sizeof(uint64_t), "cell offsets");
    c.item_of.resize(items);
    r.get(c.item_of.data(), c.item_of.size() * sizeof(uint32_t), "cell items");
    c.vectors.resize(size_t(items) * item_bytes);
    r.get(c.vectors.data(), c.vectors.size(), "vectors");
    if (!c.finish()) {
        throw Error(ErrorCategory::kIo,
                    r.path + ": corrupt ANN index (its cells do not hold each item once)");
    }
    return c;
}

// A temporary file, removed when this goes out of scope.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string& what) {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "sparsenet-ann-XXXXXX").string();
        const int fd = mkstemp(pattern.data());
        if (fd < 0) {
            throw Error(ErrorCategory::kIo, what + ": cannot create a temporary file in " +
                                                std::filesystem::temp_directory_path().string() +
                                                " (" + std::strerror(errno) + "; set TMPDIR)");
        }
        ::close(fd);
        path = pattern;
    }
    ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

uint32_t ann_dims(uint32_t width, AnnVectors vectors) {
    return dims_for(width, vectors);
}

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
    const uint32_t dims = dims_for(edge.k, vectors);
    uint32_t probe = o.probe;
    if (kind == AnnKind::kHnsw) {
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
        const size_t item_bytes = vector_bytes(vectors, edge.k, dims);
        const auto space = make_space(vectors, edge.k, dims);
        hnswlib::HierarchicalNSW<float> graph(space.get(), edge.n, o.hnsw_m, o.ef_construction,
                                              1234);
        if (edge.n > 0) graph.addPoint(x.data(), 0);
        std::exception_ptr failure;
        std::mutex failure_mutex;
        std::vector<std::thread> team;
        for (int t = 0; t < threads; ++t) {
            team.emplace_back([&, t] {
                try {
                    for (size_t j = 1 + size_t(t); j < edge.n; j += size_t(threads)) {
                        graph.addPoint(x.data() + j * item_bytes, j);
                    }
                } catch (...) {
                    std::lock_guard<std::mutex> lock(failure_mutex);
                    failure = std::current_exception();
                }
            });
        }
        for (std::thread& t : team) t.join();
        if (failure) std::rethrow_exception(failure);
        TempFile tmp(out_path);
        graph.saveIndex(tmp.path);
        std::ifstream in(tmp.path, std::ios::binary);
        blob.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } else if (kind == AnnKind::kIvf) {
        const std::vector<char> x = vectors_of();
        const size_t item_bytes = vector_bytes(vectors, edge.k, dims);
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
    report.index_bytes = kind == AnnKind::kFlat
                             ? uint64_t(edge.n) * vector_bytes(vectors, edge.k, dims)
                         : kind == AnnKind::kIvf ? cells.memory_bytes()
                                                 : blob.size();

    std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCategory::kIo, out_path + ": cannot open for writing (-o)");
    out.write(kMagic, sizeof kMagic);
    put_u32(out, kind == AnnKind::kIvf ? kVersion : kVersionWithoutCells);
    put_str(out, to_string(kind));
    put_str(out, layer_views(network).at(size_t(output)).name);
    put_str(out, model_path);
    put_u64(out, edge.n);
    put_u32(out, edge.k);
    put_u32(out, dims);
    put_u64(out, report.fingerprint);
    out.write(reinterpret_cast<const char*>(&radius), 4);
    put_u32(out, report.links);
    put_u32(out, probe);
    put_str(out, to_string(vectors));
    if (kind == AnnKind::kIvf) {
        put_u64(out, cells_bytes(cells));
        write_cells(out, cells);
    } else {
        put_u64(out, blob.size());
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
    Reader r{std::ifstream(path, std::ios::binary), path};
    if (!r.in) {
        throw Error(ErrorCategory::kIo,
                    path + ": cannot open the ANN index (" + std::strerror(errno) + ")");
    }
    char magic[sizeof kMagic] = {};
    r.in.read(magic, sizeof magic);
    if (size_t(r.in.gcount()) != sizeof magic || std::memcmp(magic, kMagic, sizeof magic) != 0) {
        throw Error(ErrorCategory::kIo, path +
                                            ": not a sparsenet ANN index (expected a file "
                                            "written by `sparsenet ann-index`)");
    }
    const uint32_t version = r.u32("version");
    if (version < 1 || version > kVersion) {
        throw Error(ErrorCategory::kIo, path + ": ANN index format version " +
                                            std::to_string(version) + "; this sparsenet reads " +
                                            "1 to " + std::to_string(kVersion) +
                                            " (rebuild it with this sparsenet's ann-index)");
    }
    const std::string kind = r.str("kind");
    m.layer = r.str("layer name");
    const std::string built_from = r.str("model path");
    m.items = r.u64("item count");
    m.width = r.u32("width");
    m.dims = r.u32("dimensions");
    m.fingerprint = r.u64("fingerprint");
    r.get(&m.radius, 4, "radius");
    m.links = r.u32("links");
    m.probe = r.u32("probe");
    if (version >= 2) {
        const std::string vectors = r.str("vector precision");
        try {
            m.vectors = parse_ann_vectors(vectors, "vectors");
        } catch (const Error&) {
            throw Error(ErrorCategory::kIo,
                        path + ": corrupt ANN index (vector precision '" + vectors + "')");
        }
    }  // version 1: FP32 vectors (the format before 16-bit vectors)
    const uint64_t bytes = r.u64("graph size");

    const DenseOutputEdge edge = checked_edge(network, output, model_path);
    const std::string layer = layer_views(network).at(size_t(output)).name;
    const uint64_t fingerprint = output_fingerprint(edge);
    if (m.layer != layer || m.items != edge.n || m.width != edge.k ||
        m.fingerprint != fingerprint) {
        throw Error(ErrorCategory::kData,
                    path + ": this ANN index was built from another model (" + built_from +
                        ": layer '" + m.layer + "', " + std::to_string(m.items) + " items x " +
                        std::to_string(m.width) + " units, weights fingerprint " +
                        hex(m.fingerprint) + "); " + model_path + " has layer '" + layer + "', " +
                        std::to_string(edge.n) + " items x " + std::to_string(edge.k) +
                        " units, fingerprint " + hex(fingerprint) +
                        "; rebuild it: sparsenet ann-index -n " + model_path + " -o " + path);
    }
    const bool known = kind == to_string(AnnKind::kHnsw) || kind == to_string(AnnKind::kFlat) ||
                       (kind == to_string(AnnKind::kIvf) && version >= 3);
    if (m.dims != dims_for(m.width, m.vectors) || !known) {
        throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (kind '" + kind + "', " +
                                            std::to_string(m.dims) + " dimensions for " +
                                            std::to_string(m.width) + " units)");
    }
    m.kind = parse_ann_kind(kind, "kind");
    const uint64_t header = uint64_t(r.in.tellg());
    r.in.seekg(0, std::ios::end);
    const uint64_t total = uint64_t(r.in.tellg());
    if (total != header + bytes) {
        throw Error(ErrorCategory::kIo,
                    path + ": " + (total < header + bytes ? "truncated" : "corrupt") +
                        " ANN index (" + std::to_string(total) + " bytes; its header announces " +
                        std::to_string(header + bytes) +
                        "); rebuild it with `sparsenet ann-index`");
    }
    m.space = make_space(m.vectors, m.width, m.dims);
    if (m.kind == AnnKind::kFlat) {
        float radius = 0.0f;
        const std::vector<char> x = item_vectors(edge, m.vectors, m.dims, &radius, path);
        const size_t item_bytes = vector_bytes(m.vectors, m.width, m.dims);
        m.ivf = IvfCells::build(
            x.data(), edge.n, item_bytes, m.width + 2, 1, [&](size_t j, float* dst) {
                decode_stored(x.data() + j * item_bytes, m.vectors, m.width, dst);
            });
        m.index_bytes = m.ivf.memory_bytes();
    } else if (m.kind == AnnKind::kIvf) {
        r.in.seekg(std::streamoff(header));
        m.ivf = read_cells(r, m.items, m.width + 2, vector_bytes(m.vectors, m.width, m.dims));
        if (cells_bytes(m.ivf) != bytes) {
            throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (its cells take " +
                                                std::to_string(cells_bytes(m.ivf)) +
                                                " bytes; its header announces " +
                                                std::to_string(bytes) + ")");
        }
        m.index_bytes = m.ivf.memory_bytes();
    } else {
        // hnswlib reads its graph from a file of its own: the blob, copied out.
        TempFile tmp(path);
        {
            r.in.seekg(std::streamoff(header));
            std::ofstream out(tmp.path, std::ios::binary);
            std::vector<char> buffer(size_t(1) << 20);
            for (uint64_t left = bytes; left > 0;) {
                const size_t chunk = size_t(std::min<uint64_t>(left, buffer.size()));
                r.get(buffer.data(), chunk, "graph");
                out.write(buffer.data(), std::streamsize(chunk));
                left -= chunk;
            }
            out.flush();
            if (!out) {
                throw Error(ErrorCategory::kIo, path + ": cannot copy the graph to " + tmp.path +
                                                    " (disk full? set TMPDIR)");
            }
        }
        try {
            auto graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(m.space.get(), tmp.path);
            m.graph = graph.get();
            m.index = std::move(graph);
        } catch (const std::runtime_error& e) {
            throw Error(ErrorCategory::kIo,
                        path + ": corrupt ANN index (hnswlib: " + e.what() + ")");
        }
        if (m.graph->label_offset_ - m.graph->offsetData_ != m.space->get_data_size()) {
            throw Error(ErrorCategory::kIo,
                        path + ": corrupt ANN index (its graph stores " +
                            std::to_string(m.graph->label_offset_ - m.graph->offsetData_) +
                            " bytes per vector; " + std::to_string(m.dims) + " " +
                            to_string(m.vectors) + " values take " +
                            std::to_string(m.space->get_data_size()) + ")");
        }
        if (m.graph->cur_element_count != m.items) {
            throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (its graph holds " +
                                                std::to_string(m.graph->cur_element_count) +
                                                " items; the header says " +
                                                std::to_string(m.items) + ")");
        }
        m.graph->setEf(m.probe);
        m.internal.assign(m.items, UINT32_MAX);
        for (size_t i = 0; i < m.items; ++i) {
            const size_t label = m.graph->getExternalLabel(hnswlib::tableint(i));
            if (label >= m.items || m.internal[label] != UINT32_MAX) {
                throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (item " +
                                                    std::to_string(label) +
                                                    " is missing or twice in its graph)");
            }
            m.internal[label] = uint32_t(i);
        }
        // What only adding or updating items reads, never a search: hnswlib's label map (ours,
        // `internal`, answers item -> graph id) and its per-item locks, about 80 bytes an item.
        std::unordered_map<hnswlib::labeltype, hnswlib::tableint>().swap(m.graph->label_lookup_);
        std::vector<std::mutex>().swap(m.graph->link_list_locks_);
        // The rest, as allocated: the graph's file less its per-item list sizes (level 0:
        // links, vector, label; the upper levels' links), the levels, link pointers, one list of
        // visited marks per concurrent search (counted once: more grow with the threads) and
        // `internal`.
        m.index_bytes =
            size_t(bytes) - m.items * sizeof(uint32_t) +
            m.items * (sizeof(int) + sizeof(void*) + sizeof(hnswlib::vl_type) + sizeof(uint32_t)) +
            m.graph->link_list_update_locks_.size() * sizeof(std::mutex);
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
    std::memcpy(&b, v + halves_for(m.width) * sizeof(uint16_t), sizeof b);
    return b;
}

void AnnIndex::set_probe(uint32_t probe) {
    if (probe == 0) return;
    impl_->probe = probe;
    if (impl_->graph) impl_->graph->setEf(probe);
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
    const size_t halves = halves_for(m.width);
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
    if (!m.graph) {
        thread_local std::vector<std::pair<float, uint32_t>> order, heap;
        m.ivf.search(scratch.data(), query, m.space->get_dist_func(),
                     m.space->get_dist_func_param(), m.probe, fetch, ids, order, heap);
        return;
    }
    auto found = m.index->searchKnn(query, fetch);
    ids.resize(found.size());
    // A max-heap of distances: the farthest first; the best end up first in ids.
    for (size_t i = ids.size(); i-- > 0;) {
        ids[i] = int64_t(found.top().second);
        found.pop();
    }
}

#endif  // SPARSENET_WITH_ANN

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

bool ann_index_available() {
    return engine::AnnIndex::available();
}

AnnIndexReport build_ann_index(const std::string& model_path, const std::string& out_path,
                               const AnnIndexOptions& options) {
    if (!engine::AnnIndex::available()) engine::ann_unavailable(out_path);
    const engine::AnnVectors vectors = engine::parse_ann_vectors(options.vectors);
    NetworkOptions net_options;
    net_options.device = "cpu";
    net_options.comm = CommKind::kLocal;
#if defined(SPARSENET_WITH_ANN)
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
#endif
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
#if defined(SPARSENET_WITH_ANN)
    // Another layer than the one released (or none: tied weights) reads the network's matrix.
    if (streamed && engine::dense_output_edge(network, output).stored == nullptr) {
        return engine::AnnIndex::build(network, output, model_path, options, out_path,
                                       streamed.get());
    }
#endif
    return engine::AnnIndex::build(network, output, model_path, options, out_path);
}

}  // namespace sparsenet
