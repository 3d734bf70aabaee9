// The ANN index's file (ann_index.h; docs/serving.md, "ANN index"): its layout, versions, writer
// and reader. Every refusal is Error(kIo) naming the file and what is wrong (fuzz_ann feeds the
// reader arbitrary bytes).
//
// Layout (host byte order, little-endian on every supported machine):
//   "sparsenet-ann\n" + 2 zero bytes   magic, 16 bytes
//   u32 version
//   str kind, str output layer, str model path (as given when built; informational)
//   u64 items, u32 width (source units), u32 dims (of the stored vectors), u64 fingerprint,
//   f32 radius R, u32 links (hnsw M), u32 probe (ivf: cells scanned; hnsw: efSearch)
//   version >= 2: str vectors ("fp32", "fp16" or "bf16": how each stored value is encoded)
//   u64 bytes, then that many bytes, by kind:
//     hnsw: the hnswlib graph (HierarchicalNSW::saveIndex's file, ann_hnsw.h);
//     ivf (version >= 3): the cells and their vectors (write_cells);
//     flat: none (its vectors are the model's own, recomputed and rounded when loading).
// str: u32 length, then the bytes. The stored vectors' layout: ann_vectors.h (ann_dims). The
// fingerprint is always that of the model's FP32 weights and biases (output_fingerprint.h).
//
// Versions: 1 had FP32 vectors only (no vectors field; still read); 2 records the vectors'
// encoding; 3 adds kind ivf (unknown to version 2 readers). ivf files are written as version 3,
// hnsw and flat ones as version 2, which every reader since 16-bit vectors takes.
#pragma once

#include <cstdint>
#include <fstream>
#include <ostream>
#include <string>

#include "engine/ann_ivf.h"
#include "engine/ann_vectors.h"

namespace sparsenet::engine {

constexpr uint32_t kAnnVersion = 3;              // the newest this sparsenet reads
constexpr uint32_t kAnnVersionWithoutCells = 2;  // what hnsw and flat files are written as
constexpr uint32_t kAnnVersionWithCells = 3;     // the first that has kind ivf

struct AnnHeader {
    uint32_t version = kAnnVersion;
    std::string kind;  // as stored: ann_index.cpp checks it against the kinds it knows
    std::string layer, model_path;
    uint64_t items = 0;
    uint32_t width = 0, dims = 0;
    uint64_t fingerprint = 0;
    float radius = 0.0f;
    uint32_t links = 0, probe = 0;
    AnnVectors vectors = AnnVectors::kFp32;
    uint64_t bytes = 0;  // of the body after the header
};

// Reads an index file's fields in order, throwing Error(kIo) naming the file at the first one
// missing ("truncated ANN index (ends in its <field>)") or out of range.
class AnnReader {
  public:
    // Error(kIo) naming `path` when it cannot be opened.
    explicit AnnReader(const std::string& path);
    // The header: the magic, a version from 1 to kAnnVersion and every field through the body's
    // byte count; afterwards the stream is at the body.
    AnnHeader header();
    void get(void* p, size_t bytes, const char* field);
    uint32_t u32(const char* field);
    uint64_t u64(const char* field);
    std::string str(const char* field);
    const std::string& path() const { return path_; }
    std::ifstream& stream() { return in_; }

  private:
    std::ifstream in_;
    std::string path_;
};

// The header as AnnReader::header reads it (version decides whether the vectors field is there).
void write_header(std::ostream& out, const AnnHeader& h);

// Kind ivf's body: u32 cells, u32 dims, f32 centroids [cells, dims], u64 offsets [cells + 1],
// u32 item of each slot [items], then the stored vectors in slot order [items, vector bytes].
uint64_t cells_bytes(const IvfCells& c);
void write_cells(std::ostream& out, const IvfCells& c);
// Error(kIo) naming the file when the cells do not fit the header or hold an item twice.
IvfCells read_cells(AnnReader& r, uint64_t items, uint32_t dims, size_t item_bytes);

// Whether `path` is an ANN index of a kind that stores its vectors (ivf, hnsw): false for flat
// and for anything that is not an index (whose faults the full read names).
bool ann_file_holds_vectors(const std::string& path);

}  // namespace sparsenet::engine
