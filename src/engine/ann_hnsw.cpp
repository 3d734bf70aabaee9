// The ANN index's kind hnsw (ann_hnsw.h): hnswlib's graph, when the build has hnswlib.
#include "engine/ann_hnsw.h"

#include "sparsenet/error.h"

#if defined(SPARSENET_WITH_HNSWLIB)
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <hnswlib/hnswlib.h>
#endif

namespace sparsenet::engine {

#if !defined(SPARSENET_WITH_HNSWLIB)

namespace {
[[noreturn]] void unavailable(const std::string& what) {
    throw Error(ErrorCategory::kUsage,
                what +
                    ": an ANN index of kind hnsw needs hnswlib, which this sparsenet was built "
                    "without (install libhnswlib-dev, scripts/install-deps, and configure with "
                    "-DSPARSENET_HNSWLIB=ON); kinds ivf and flat need nothing more");
}
}  // namespace

struct HnswGraph::Impl {};
bool HnswGraph::available() {
    return false;
}
void HnswGraph::require(const std::string& what) {
    unavailable(what);
}
std::string HnswGraph::build(const char*, size_t, AnnVectors, uint32_t, uint32_t, uint32_t, int,
                             const std::string& what) {
    unavailable(what);
}
HnswGraph::HnswGraph(AnnReader& r, uint64_t, AnnVectors, uint32_t, uint64_t) {
    unavailable(r.path());
}
HnswGraph::~HnswGraph() = default;
const char* HnswGraph::stored(uint32_t) const {
    return nullptr;
}
void HnswGraph::set_ef(uint32_t) {}
void HnswGraph::search(const void*, size_t, std::vector<int64_t>& ids) const {
    ids.clear();
}
size_t HnswGraph::memory_bytes() const {
    return 0;
}

#else

namespace {

// hnswlib's space over the stored layout: the same distance as kinds ivf and flat
// (ann_vectors.h, stored_distance).
class StoredSpace : public hnswlib::SpaceInterface<float> {
  public:
    StoredSpace(AnnVectors vectors, uint32_t width)
        : bytes_(ann_vector_bytes(vectors, width)), distance_(stored_distance(vectors, width)) {}
    size_t get_data_size() override { return bytes_; }
    hnswlib::DISTFUNC<float> get_dist_func() override { return distance_.func; }
    void* get_dist_func_param() override { return &distance_.param; }

  private:
    size_t bytes_;
    StoredDistance distance_;
};

// A temporary file (hnswlib reads and writes its graph through files), removed when this goes
// out of scope.
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

struct HnswGraph::Impl {
    std::unique_ptr<StoredSpace> space;
    std::unique_ptr<hnswlib::HierarchicalNSW<float> > graph;
    std::vector<uint32_t> internal;  // item -> the graph's own id
    uint64_t bytes = 0;              // of the graph's file
};

bool HnswGraph::available() {
    return true;
}
void HnswGraph::require(const std::string&) {}

std::string HnswGraph::build(const char* x, size_t n, AnnVectors vectors, uint32_t width,
                             uint32_t m, uint32_t ef_construction, int threads,
                             const std::string& what) {
    const size_t item_bytes = ann_vector_bytes(vectors, width);
    StoredSpace space(vectors, width);
    hnswlib::HierarchicalNSW<float> graph(&space, n, m, ef_construction, 1234);
    if (n > 0) graph.addPoint(x, 0);
    std::exception_ptr failure;
    std::mutex failure_mutex;
    std::vector<std::thread> team;
    for (int t = 0; t < threads; ++t) {
        team.emplace_back([&, t] {
            try {
                for (size_t j = 1 + size_t(t); j < n; j += size_t(threads)) {
                    graph.addPoint(x + j * item_bytes, j);
                }
            } catch (...) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                failure = std::current_exception();
            }
        });
    }
    for (std::thread& t : team) t.join();
    if (failure) std::rethrow_exception(failure);
    TempFile tmp(what);
    graph.saveIndex(tmp.path);
    std::ifstream in(tmp.path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

HnswGraph::HnswGraph(AnnReader& r, uint64_t bytes, AnnVectors vectors, uint32_t width,
                     uint64_t items)
    : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    const std::string& path = r.path();
    m.bytes = bytes;
    m.space = std::make_unique<StoredSpace>(vectors, width);
    // hnswlib reads its graph from a file of its own: the body, copied out.
    TempFile tmp(path);
    {
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
        m.graph = std::make_unique<hnswlib::HierarchicalNSW<float> >(m.space.get(), tmp.path);
    } catch (const std::runtime_error& e) {
        throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (hnswlib: " + e.what() + ")");
    }
    hnswlib::HierarchicalNSW<float>& g = *m.graph;
    if (g.label_offset_ - g.offsetData_ != m.space->get_data_size()) {
        throw Error(ErrorCategory::kIo,
                    path + ": corrupt ANN index (its graph stores " +
                        std::to_string(g.label_offset_ - g.offsetData_) + " bytes per vector; " +
                        std::to_string(ann_dims(width, vectors)) + " " + to_string(vectors) +
                        " values take " + std::to_string(m.space->get_data_size()) + ")");
    }
    if (g.cur_element_count != items) {
        throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (its graph holds " +
                                            std::to_string(g.cur_element_count) +
                                            " items; the header says " + std::to_string(items) +
                                            ")");
    }
    m.internal.assign(items, UINT32_MAX);
    for (size_t i = 0; i < items; ++i) {
        const size_t label = g.getExternalLabel(hnswlib::tableint(i));
        if (label >= items || m.internal[label] != UINT32_MAX) {
            throw Error(ErrorCategory::kIo, path + ": corrupt ANN index (item " +
                                                std::to_string(label) +
                                                " is missing or twice in its graph)");
        }
        m.internal[label] = uint32_t(i);
    }
    // What only adding or updating items reads, never a search: hnswlib's label map (ours,
    // `internal`, answers item -> graph id) and its per-item locks, about 80 bytes an item.
    std::unordered_map<hnswlib::labeltype, hnswlib::tableint>().swap(g.label_lookup_);
    std::vector<std::mutex>().swap(g.link_list_locks_);
}

HnswGraph::~HnswGraph() = default;

const char* HnswGraph::stored(uint32_t item) const {
    return impl_->graph->getDataByInternalId(impl_->internal[item]);
}

void HnswGraph::set_ef(uint32_t ef) {
    impl_->graph->setEf(ef);
}

void HnswGraph::search(const void* query, size_t fetch, std::vector<int64_t>& ids) const {
    auto found = impl_->graph->searchKnn(query, fetch);
    ids.resize(found.size());
    // A max-heap of distances: the farthest first; the best end up first in ids.
    for (size_t i = ids.size(); i-- > 0;) {
        ids[i] = int64_t(found.top().second);
        found.pop();
    }
}

size_t HnswGraph::memory_bytes() const {
    const Impl& m = *impl_;
    const size_t items = m.internal.size();
    // The graph's file less its per-item list sizes (level 0: links, vector, label; the upper
    // levels' links), the levels, link pointers, one list of visited marks per concurrent search
    // (counted once: more grow with the threads) and `internal`.
    return size_t(m.bytes) - items * sizeof(uint32_t) +
           items * (sizeof(int) + sizeof(void*) + sizeof(hnswlib::vl_type) + sizeof(uint32_t)) +
           m.graph->link_list_update_locks_.size() * sizeof(std::mutex);
}

#endif  // SPARSENET_WITH_HNSWLIB

}  // namespace sparsenet::engine
