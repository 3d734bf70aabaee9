// The ANN index's file (ann_file.h): header and ivf body, written and read.
#include "engine/ann_file.h"

#include <cerrno>
#include <cstring>

#include "sparsenet/error.h"

namespace sparsenet::engine {

namespace {

constexpr char kMagic[16] = {'s', 'p', 'a', 'r', 's', 'e',  'n', 'e',
                             't', '-', 'a', 'n', 'n', '\n', 0,   0};

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

}  // namespace

AnnReader::AnnReader(const std::string& path) : in_(path, std::ios::binary), path_(path) {
    if (!in_) {
        throw Error(ErrorCategory::kIo,
                    path + ": cannot open the ANN index (" + std::strerror(errno) + ")");
    }
}

void AnnReader::get(void* p, size_t bytes, const char* field) {
    in_.read(static_cast<char*>(p), std::streamsize(bytes));
    if (size_t(in_.gcount()) != bytes) {
        throw Error(ErrorCategory::kIo, path_ + ": truncated ANN index (ends in its " + field +
                                            "); rebuild it with `sparsenet ann-index`");
    }
}

uint32_t AnnReader::u32(const char* field) {
    uint32_t v;
    get(&v, 4, field);
    return v;
}

uint64_t AnnReader::u64(const char* field) {
    uint64_t v;
    get(&v, 8, field);
    return v;
}

std::string AnnReader::str(const char* field) {
    const uint32_t size = u32(field);
    if (size > 65536) {
        throw Error(ErrorCategory::kIo, path_ + ": corrupt ANN index (its " + std::string(field) +
                                            " claims " + std::to_string(size) + " bytes)");
    }
    std::string s(size, '\0');
    get(s.data(), size, field);
    return s;
}

AnnHeader AnnReader::header() {
    char magic[sizeof kMagic] = {};
    in_.read(magic, sizeof magic);
    if (size_t(in_.gcount()) != sizeof magic || std::memcmp(magic, kMagic, sizeof magic) != 0) {
        throw Error(ErrorCategory::kIo, path_ +
                                            ": not a sparsenet ANN index (expected a file "
                                            "written by `sparsenet ann-index`)");
    }
    AnnHeader h;
    h.version = u32("version");
    if (h.version < 1 || h.version > kAnnVersion) {
        throw Error(ErrorCategory::kIo, path_ + ": ANN index format version " +
                                            std::to_string(h.version) + "; this sparsenet reads " +
                                            "1 to " + std::to_string(kAnnVersion) +
                                            " (rebuild it with this sparsenet's ann-index)");
    }
    h.kind = str("kind");
    h.layer = str("layer name");
    h.model_path = str("model path");
    h.items = u64("item count");
    h.width = u32("width");
    h.dims = u32("dimensions");
    h.fingerprint = u64("fingerprint");
    get(&h.radius, 4, "radius");
    h.links = u32("links");
    h.probe = u32("probe");
    if (h.version >= 2) {
        const std::string vectors = str("vector precision");
        try {
            h.vectors = parse_ann_vectors(vectors, "vectors");
        } catch (const Error&) {
            throw Error(ErrorCategory::kIo,
                        path_ + ": corrupt ANN index (vector precision '" + vectors + "')");
        }
    }  // version 1: FP32 vectors (the format before 16-bit vectors)
    h.bytes = u64("graph size");
    return h;
}

void write_header(std::ostream& out, const AnnHeader& h) {
    out.write(kMagic, sizeof kMagic);
    put_u32(out, h.version);
    put_str(out, h.kind);
    put_str(out, h.layer);
    put_str(out, h.model_path);
    put_u64(out, h.items);
    put_u32(out, h.width);
    put_u32(out, h.dims);
    put_u64(out, h.fingerprint);
    out.write(reinterpret_cast<const char*>(&h.radius), 4);
    put_u32(out, h.links);
    put_u32(out, h.probe);
    if (h.version >= 2) put_str(out, to_string(h.vectors));
    put_u64(out, h.bytes);
}

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

IvfCells read_cells(AnnReader& r, uint64_t items, uint32_t dims, size_t item_bytes) {
    IvfCells c;
    c.cells = r.u32("cell count");
    c.dims = r.u32("cell dimensions");
    if (c.dims != dims || c.cells > items || (items > 0 && c.cells == 0)) {
        throw Error(ErrorCategory::kIo, r.path() + ": corrupt ANN index (" +
                                            std::to_string(c.cells) + " cells of " +
                                            std::to_string(c.dims) + " dimensions for " +
                                            std::to_string(items) + " items)");
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
                    r.path() + ": corrupt ANN index (its cells do not hold each item once)");
    }
    return c;
}

bool ann_file_holds_vectors(const std::string& path) {
    try {
        AnnReader r(path);
        return r.header().kind != "flat";
    } catch (const Error&) {
        return false;
    }
}

}  // namespace sparsenet::engine
