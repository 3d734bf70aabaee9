// ANN index files: approximate maximum-inner-product search over a model's output layer, for
// serving large catalogues (docs/serving.md, "ANN index"). Not a features index
// (index_file.h, DSSTNE's label files): an ANN index is always called so, its files `.ann`.
//
// build_ann_index reads a model file and writes the index of its output layer's item vectors;
// RecommenderOptions::ann_index (recommender.h) serves from it. The file records the model it
// was built from (layer, shape, a fingerprint of the weights) and is refused for another.
#pragma once

#include <cstdint>
#include <string>

namespace sparsenet {

struct AnnIndexOptions {
    // ivf (k-means cells; the default) | hnsw (a navigable small-world graph, hnswlib) | flat
    // (exhaustive: the exact answer, for tests and small catalogues; nothing but the header is
    // stored). docs/serving.md compares them.
    std::string kind = "ivf";
    uint32_t cells = 0;    // ivf: k-means cells; 0: the power of 2 at or above 4 sqrt(items)
    uint32_t hnsw_m = 16;  // hnsw: links per node (32 on the base layer)
    uint32_t ef_construction = 80;  // hnsw: candidate list while building
    // The accuracy knob stored as the file's default (ivf: the cells a query scans, 0: 1/32 of
    // them, at least 8; hnsw: efSearch, the candidate list of a search, 0: 128).
    // RecommenderOptions::ann_probe overrides it when serving.
    uint32_t probe = 0;
    // How the index stores the item weights w_j: "fp16" (the default: about half the memory
    // of FP32; measured recall in docs/benchmarks.md), "bf16" or "fp32"; the bias b_j (and
    // the augmentation) stay FP32. The re-ranking reads these vectors, so with 16 bits the
    // scores are the output layer's formula over the rounded weights (docs/serving.md, "ANN
    // index").
    std::string vectors = "fp16";
    int threads = 0;           // building; 0: every hardware thread
    std::string output_layer;  // the ranked layer; empty: the first Output layer
};

struct AnnIndexReport {
    std::string kind;
    uint64_t items = 0;
    uint32_t width = 0;  // units of the layer feeding the output layer
    uint32_t links = 0;  // hnsw M
    uint32_t cells = 0;  // ivf cells
    uint32_t probe = 0;
    std::string vectors;   // fp32 | fp16 | bf16
    double seconds = 0.0;  // training and adding items (not reading the model)
    uint64_t file_bytes = 0;
    uint64_t index_bytes = 0;  // the search structure alone
    uint64_t fingerprint = 0;  // of the output layer's weights and biases
};

// Whether this build can build and serve ANN indexes of `kind`: ivf and flat always; hnsw when
// hnswlib was found at configure time (CMake's SPARSENET_HNSWLIB). Error(kUsage) for an unknown
// kind.
bool ann_index_available(const std::string& kind = "ivf");

// Builds the ANN index of `model_path`'s output layer into `out_path`. Errors are
// sparsenet::Error: kIo for unreadable / unwritable files, kUsage for bad options, a layer whose
// scores are not inner products (SoftMax, several sources), or kind hnsw in a build without
// hnswlib.
AnnIndexReport build_ann_index(const std::string& model_path, const std::string& out_path,
                               const AnnIndexOptions& options = {});

}  // namespace sparsenet
