// The ANN index's kind hnsw: hnswlib's navigable small-world graph over the stored vectors
// (ann_vectors.h), searched by their L2 distance. The only part of the index that needs a library
// beyond the engine's: hnswlib (Debian's libhnswlib-dev, header-only, compiled with this build's
// flags; CMake's SPARSENET_HNSWLIB). Without it available() is false and building or loading a
// graph throws Error(kUsage) saying so; kinds ivf and flat (ann_ivf.h) need nothing of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/ann_file.h"
#include "engine/ann_vectors.h"

namespace sparsenet::engine {

class HnswGraph {
  public:
    static bool available();
    // Error(kUsage) naming `what` (a file) when this build has no hnswlib.
    static void require(const std::string& what);

    // The graph of n stored vectors x (item order, vectors' layout for `width` units) with M
    // links a node and efConstruction ef_construction, built on `threads` threads: its file
    // (hnswlib's saveIndex), the ANN index's body. `what` names the output file in errors.
    static std::string build(const char* x, size_t n, AnnVectors vectors, uint32_t width,
                             uint32_t m, uint32_t ef_construction, int threads,
                             const std::string& what);

    // The graph of an index file whose reader stands at its body of `bytes` bytes: Error(kIo)
    // naming the file when it is not a graph of `items` vectors of that layout.
    HnswGraph(AnnReader& r, uint64_t bytes, AnnVectors vectors, uint32_t width, uint64_t items);
    ~HnswGraph();
    HnswGraph(const HnswGraph&) = delete;
    HnswGraph& operator=(const HnswGraph&) = delete;

    const char* stored(uint32_t item) const;  // item's stored vector
    void set_ef(uint32_t ef);                 // efSearch; not thread-safe
    // Up to `fetch` items nearest to `query` (in the stored layout), best first. Thread-safe.
    void search(const void* query, size_t fetch, std::vector<int64_t>& ids) const;
    // Bytes held: the graph's file less what a search never reads (its per-item list sizes),
    // plus the per-item tables hnswlib allocates (levels, link pointers, visited marks) and ours
    // (item -> graph id).
    size_t memory_bytes() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sparsenet::engine
