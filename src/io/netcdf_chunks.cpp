// Whole 1-D variables of a netCDF-4 (HDF5) file: chunks read serially, inflated in parallel.
#include "io/netcdf_chunks.h"

#include <hdf5.h>
#include <omp.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace sparsenet::io {
namespace {

static_assert(sizeof(hid_t) == sizeof(int64_t), "ChunkedFile keeps an hid_t in an int64_t");
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "netcdf_chunks.cpp copies little-endian stored elements as they are"
#endif

std::atomic<uint64_t> g_reads{0};

// HDF5 prints its error stack on stderr by default: a file or variable this reader does not take
// is not an error (the caller reads it through netCDF), so printing is off while it works.
class QuietErrors {
  public:
    QuietErrors() {
        H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    }
    ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
    QuietErrors(const QuietErrors&) = delete;
    QuietErrors& operator=(const QuietErrors&) = delete;

  private:
    H5E_auto2_t func_ = nullptr;
    void* data_ = nullptr;
};

// An HDF5 identifier closed on scope exit.
class Handle {
  public:
    Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    ~Handle() {
        if (id_ >= 0) close_(id_);
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    hid_t get() const { return id_; }
    bool ok() const { return id_ >= 0; }

  private:
    hid_t id_;
    herr_t (*close_)(hid_t);
};

hid_t stored_type(ChunkElement e) {
    switch (e) {
        case ChunkElement::kUInt32:
            return H5T_STD_U32LE;
        case ChunkElement::kInt32:
            return H5T_STD_I32LE;
        case ChunkElement::kUInt64:
            return H5T_STD_U64LE;
        case ChunkElement::kInt64:
            return H5T_STD_I64LE;
        case ChunkElement::kFloat32:
            return H5T_IEEE_F32LE;
    }
    return -1;
}

size_t element_size(ChunkElement e) {
    return e == ChunkElement::kUInt64 || e == ChunkElement::kInt64 ? 8 : 4;
}

// The filters of a chunked variable, in the order HDF5 applied them when writing; -1: absent.
struct Pipeline {
    int shuffle = -1;
    int deflate = -1;
};

// Shuffle then deflate, either alone, or none: anything else is not ours to decode.
bool read_pipeline(hid_t dcpl, size_t element, Pipeline& p) {
    const int n = H5Pget_nfilters(dcpl);
    if (n < 0) return false;
    for (int i = 0; i < n; ++i) {
        unsigned flags = 0;
        unsigned config = 0;
        unsigned cd[8] = {};
        size_t cd_count = 8;
        char name[64];
        const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &cd_count,
                                               cd, sizeof name, name, &config);
        if (id == H5Z_FILTER_SHUFFLE) {
            // The element size is set at creation from the type; a shuffle after deflate would
            // need the other order when reading.
            if (p.shuffle >= 0 || p.deflate >= 0 || cd_count < 1 || cd[0] != element) return false;
            p.shuffle = i;
        } else if (id == H5Z_FILTER_DEFLATE) {
            if (p.deflate >= 0) return false;
            p.deflate = i;
        } else {
            return false;
        }
    }
    return n < 32;  // the filter mask of a chunk has one bit per filter
}

// HDF5's shuffle filter stores byte j of every element together: element i's byte j is at
// j * n + i.
template <size_t E>
void unshuffle(const unsigned char* src, unsigned char* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < E; ++j) dst[i * E + j] = src[j * n + i];
    }
}

// One variable's read: where chunk `index` goes and how it decodes.
struct Plan {
    Pipeline pipeline;
    size_t element = 0;
    uint64_t chunk = 0;  // elements per chunk
    uint64_t start = 0, count = 0;
    unsigned char* out = nullptr;
    std::vector<unsigned char> fill;  // one element: the fill value of a chunk never written
};

// A chunk as read from the file: its stored bytes and filter mask, or missing (fill value).
struct Stored {
    // Not a std::vector: zeroing the bytes HDF5 then overwrites took 8 % of a whole read of
    // ML-20M-shaped data (perf, 2 threads).
    std::unique_ptr<unsigned char[]> bytes;
    size_t size = 0;
    uint32_t mask = 0;
    bool missing = false;
};

// Decodes chunk `index` into its part of plan.out; scratch_a/b: this thread's buffers.
bool decode(const Plan& plan, uint64_t index, const Stored& stored,
            std::vector<unsigned char>& scratch_a, std::vector<unsigned char>& scratch_b) {
    const size_t element = plan.element;
    const uint64_t first = index * plan.chunk;
    const uint64_t lo = std::max(plan.start, first);
    const uint64_t hi = std::min(plan.start + plan.count, first + plan.chunk);
    unsigned char* dst = plan.out + (lo - plan.start) * element;
    const size_t chunk_bytes = plan.chunk * element;
    const bool whole = lo == first && hi == first + plan.chunk;
    if (stored.missing) {
        for (uint64_t i = lo; i < hi; ++i, dst += element) {
            std::memcpy(dst, plan.fill.data(), element);
        }
        return true;
    }
    const auto active = [&](int position) {
        return position >= 0 && (stored.mask & (uint32_t{1} << position)) == 0;
    };
    const bool deflate = active(plan.pipeline.deflate);
    const bool shuffle = active(plan.pipeline.shuffle);
    const unsigned char* data = stored.bytes.get();
    size_t size = stored.size;
    if (deflate) {
        unsigned char* target = whole && !shuffle ? dst : nullptr;
        if (target == nullptr) {
            scratch_a.resize(chunk_bytes);
            target = scratch_a.data();
        }
        uLongf length = chunk_bytes;
        if (uncompress(target, &length, data, size) != Z_OK) return false;
        data = target;
        size = length;
    }
    if (size != chunk_bytes) return false;
    if (shuffle) {
        unsigned char* target = whole ? dst : nullptr;
        if (target == nullptr) {
            scratch_b.resize(chunk_bytes);
            target = scratch_b.data();
        }
        if (element == 8) {
            unshuffle<8>(data, target, plan.chunk);
        } else {
            unshuffle<4>(data, target, plan.chunk);
        }
        data = target;
    }
    if (data != dst) std::memcpy(dst, data + (lo - first) * element, (hi - lo) * element);
    return true;
}

// Reads chunk `index`'s stored bytes (HDF5: the calling thread only).
bool read_stored(hid_t dset, const Plan& plan, uint64_t index, Stored& stored) {
    const hsize_t offset = index * plan.chunk;
    unsigned mask = 0;
    haddr_t address = 0;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(dset, &offset, &mask, &address, &size) < 0) return false;
    if (size == 0) {
        stored.missing = true;
        return !plan.fill.empty();
    }
    // A size from a damaged index is not allocated: deflate's output for a chunk is never
    // longer than compressBound (an unfiltered chunk is exactly the chunk's size).
    if (size > compressBound(static_cast<uLong>(plan.chunk * plan.element))) return false;
    stored.bytes.reset(new unsigned char[size]);
    stored.size = size;
    uint32_t filters = 0;
    if (H5Dread_chunk(dset, H5P_DEFAULT, &offset, &filters, stored.bytes.get()) < 0) return false;
    stored.mask = filters;
    return true;
}

// The fill value HDF5 gives a chunk never written, when it gives one (it leaves the reader's
// buffer as it was when the fill time is "never" or no fill value is set: such a chunk is then
// left to netCDF).
bool read_fill(hid_t dcpl, hid_t type, size_t element, std::vector<unsigned char>& fill) {
    H5D_fill_value_t status;
    H5D_fill_time_t time;
    if (H5Pfill_value_defined(dcpl, &status) < 0 || H5Pget_fill_time(dcpl, &time) < 0) return false;
    if (time == H5D_FILL_TIME_NEVER || status == H5D_FILL_VALUE_UNDEFINED) return true;
    if (time == H5D_FILL_TIME_IFSET && status != H5D_FILL_VALUE_USER_DEFINED) return true;
    fill.assign(element, 0);
    if (H5Pget_fill_value(dcpl, type, fill.data()) < 0) fill.clear();
    return true;
}

}  // namespace

bool parallel_inflate_enabled() {
    const char* value = std::getenv("SPARSENET_PARALLEL_INFLATE");
    return value == nullptr || std::strcmp(value, "0") != 0;
}

uint64_t parallel_inflate_reads() {
    return g_reads.load();
}

ChunkedFile::ChunkedFile(const std::string& path) {
    QuietErrors quiet;
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
}

ChunkedFile::~ChunkedFile() {
    if (file_ >= 0) {
        QuietErrors quiet;
        H5Fclose(file_);
    }
}

bool ChunkedFile::read(const std::string& name, ChunkElement element, uint64_t length,
                       uint64_t start, uint64_t count, void* out, int threads) const {
    if (file_ < 0 || start > length || count > length - start) return false;
    if (count == 0) return true;
    QuietErrors quiet;
    // netCDF-4 stores a variable that shares its name with a dimension it is not the coordinate
    // of as "_nc4_non_coord_<name>".
    hid_t id = H5Dopen2(file_, ("_nc4_non_coord_" + name).c_str(), H5P_DEFAULT);
    if (id < 0) id = H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
    Handle dset(id, H5Dclose);
    if (!dset.ok()) return false;
    Handle type(H5Dget_type(dset.get()), H5Tclose);
    if (!type.ok() || H5Tequal(type.get(), stored_type(element)) <= 0) return false;
    Handle space(H5Dget_space(dset.get()), H5Sclose);
    hsize_t extent = 0;
    if (!space.ok() || H5Sget_simple_extent_ndims(space.get()) != 1 ||
        H5Sget_simple_extent_dims(space.get(), &extent, nullptr) != 1 || extent != length) {
        return false;
    }
    Handle dcpl(H5Dget_create_plist(dset.get()), H5Pclose);
    if (!dcpl.ok() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return false;
    Plan plan;
    plan.element = element_size(element);
    hsize_t chunk = 0;
    unsigned options = 0;
    if (H5Pget_chunk(dcpl.get(), 1, &chunk) != 1 || chunk == 0 ||
        H5Pget_chunk_opts(dcpl.get(), &options) < 0 || options != 0 ||
        !read_pipeline(dcpl.get(), plan.element, plan.pipeline) ||
        !read_fill(dcpl.get(), type.get(), plan.element, plan.fill)) {
        return false;
    }
    plan.chunk = chunk;
    plan.start = start;
    plan.count = count;
    plan.out = static_cast<unsigned char*>(out);
    const uint64_t first = start / chunk;
    const uint64_t last = (start + count - 1) / chunk;

    threads = std::max(1, threads);
    std::atomic<bool> failed{false};
    std::vector<std::vector<unsigned char>> scratch(2 * static_cast<size_t>(threads));
    if (threads == 1) {
        try {  // out of memory for a chunk: netCDF's path is left to report it
            for (uint64_t c = first; c <= last; ++c) {
                Stored stored;
                if (!read_stored(dset.get(), plan, c, stored) ||
                    !decode(plan, c, stored, scratch[0], scratch[1])) {
                    return false;
                }
            }
        } catch (const std::bad_alloc&) {
            return false;
        }
        ++g_reads;
        return true;
    }
    // The calling thread (OpenMP's master) reads each chunk and hands it to a task; the other
    // threads, and the master at the region's end, inflate them.
#pragma omp parallel num_threads(threads)
    {
#pragma omp master
        {
            for (uint64_t c = first; c <= last && !failed.load(); ++c) {
                std::shared_ptr<Stored> stored;
                try {
                    stored = std::make_shared<Stored>();
                    if (!read_stored(dset.get(), plan, c, *stored)) failed = true;
                } catch (...) {
                    failed = true;
                }
                if (failed.load()) break;
#pragma omp task firstprivate(stored, c) shared(plan, failed, scratch)
                {
                    if (!failed.load()) {
                        const size_t t = static_cast<size_t>(omp_get_thread_num());
                        try {
                            if (!decode(plan, c, *stored, scratch[2 * t], scratch[2 * t + 1])) {
                                failed = true;
                            }
                        } catch (...) {
                            failed = true;
                        }
                    }
                }
            }
        }
    }
    if (failed.load()) return false;
    ++g_reads;
    return true;
}

}  // namespace sparsenet::io
