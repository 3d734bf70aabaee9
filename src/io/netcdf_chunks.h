// Whole 1-D variables of a netCDF-4 (HDF5) file read chunk by chunk, inflated in parallel.
//
// netCDF reads a compressed variable through HDF5, which inflates one chunk after the other on
// one thread: reading a dataset of 20 M nonzeros is bound by zlib. Here every chunk's stored
// (still compressed) bytes are read with HDF5's direct chunk read on the calling thread (HDF5
// is built without thread safety: every HDF5 call stays on that one thread), and OpenMP tasks
// inflate and un-shuffle them into the output while the next chunks are read.
//
// Only what write_datasets and DSSTNE write is taken: a chunked 1-D variable of a fixed-size
// little-endian integer or IEEE float type whose filters are shuffle and/or deflate. Anything else
// (another filter such as fletcher32 or szip, a contiguous layout, a chunk that does not inflate,
// a missing chunk without a fill value) makes read() return false, and the caller reads the
// variable through netCDF as before: the errors a damaged file gives stay netCDF's.
#pragma once

#include <cstdint>
#include <string>

namespace sparsenet::io {

// The element type a variable is read as: exactly its stored type (no conversion).
enum class ChunkElement { kUInt32, kInt32, kUInt64, kInt64, kFloat32 };

// False when the environment variable SPARSENET_PARALLEL_INFLATE is "0" (the serial netCDF path
// for every read, as before this reader existed; docs/data-format.md).
bool parallel_inflate_enabled();

// How many variables (or parts) read() has read successfully in this process: lets the tests
// tell that a read took this path and not the fallback.
uint64_t parallel_inflate_reads();

// One netCDF-4 file opened a second time, read-only, through HDF5 (beside netCDF's own handle).
class ChunkedFile {
  public:
    // Never throws for a file HDF5 cannot open (a classic netCDF file): usable() is then false.
    explicit ChunkedFile(const std::string& path);
    ~ChunkedFile();
    ChunkedFile(const ChunkedFile&) = delete;
    ChunkedFile& operator=(const ChunkedFile&) = delete;

    bool usable() const { return file_ >= 0; }

    // Elements [start, start + count) of the root-group variable `name` (netCDF's length
    // `length`, stored as `element`) into `out` (count elements), inflated on `threads` threads.
    // False when the variable cannot be read this way or any chunk fails: `out` then holds
    // nothing meaningful and the caller reads the variable through netCDF.
    bool read(const std::string& name, ChunkElement element, uint64_t length, uint64_t start,
              uint64_t count, void* out, int threads) const;

  private:
    int64_t file_ = -1;  // hid_t
};

}  // namespace sparsenet::io
