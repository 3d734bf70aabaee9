// The parallel read of compressed netCDF-4 variables (src/io/netcdf_chunks.h) and its use by
// Dataset::read: the same Dataset, and the same errors, as the serial netCDF path.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <netcdf.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/netcdf_chunks.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "support/netcdf_test_util.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::contains;
using testing::expect_error;
using testing::expect_same_dataset;
using testing::RowShape;
using testing::TempDir;

using testing::nc_ok;

// How a test file stores its sparse dataset.
struct Storage {
    int format = NC_NETCDF4;         // or 0 (CDF-1), NC_64BIT_OFFSET (CDF-2), NC_64BIT_DATA (CDF-5)
    size_t chunk = size_t{1} << 20;  // elements per chunk (at most the variable's length)
    bool contiguous = false;
    bool shuffle = true;
    int deflate = 1;  // level; 0: no deflate
    bool fletcher32 = false;
    bool unlimited = false;  // both dimensions unlimited: a chunk may be longer than its variable
    nc_type offset_type = NC_UINT64;
    nc_type index_type = NC_UINT;
    nc_type value_type = NC_FLOAT;  // NC_NAT: no sparseData (boolean)
};

// The raw arrays of one sparse dataset (DSSTNE's layout), which may be invalid.
struct Arrays {
    uint32_t width = 0;
    std::vector<long long> starts, ends, indices;
    std::vector<double> values;
};

Arrays arrays_of(const Dataset& d) {
    Arrays a;
    a.width = d.cols;
    for (uint64_t r = 0; r < d.rows; ++r) {
        a.starts.push_back(static_cast<long long>(d.offsets[r]));
        a.ends.push_back(static_cast<long long>(d.offsets[r + 1]));
    }
    a.indices.assign(d.indices.begin(), d.indices.end());
    a.values.assign(d.values.begin(), d.values.end());
    return a;
}

int define(int nc, const char* name, nc_type type, int dim, size_t length, const Storage& s) {
    int id = -1;
    EXPECT_EQ(nc_def_var(nc, name, type, 1, &dim, &id), NC_NOERR) << name;
    if (s.format != NC_NETCDF4 || length == 0) return id;
    if (s.contiguous) {
        EXPECT_EQ(nc_def_var_chunking(nc, id, NC_CONTIGUOUS, nullptr), NC_NOERR);
        return id;
    }
    const size_t chunk = s.unlimited ? s.chunk : std::min(s.chunk, length);
    EXPECT_EQ(nc_def_var_chunking(nc, id, NC_CHUNKED, &chunk), NC_NOERR);
    if (s.shuffle || s.deflate > 0) {
        EXPECT_EQ(nc_def_var_deflate(nc, id, s.shuffle, s.deflate > 0, s.deflate), NC_NOERR);
    }
    if (s.fletcher32) {
        EXPECT_EQ(nc_def_var_fletcher32(nc, id, NC_FLETCHER32), NC_NOERR);
    }
    return id;
}

void write_arrays(const std::string& path, const Arrays& a, const Storage& s) {
    int nc;
    nc_ok(nc_create(path.c_str(), s.format | NC_CLOBBER, &nc));
    const int one = 1, zero = 0, width = static_cast<int>(a.width);
    const int attributes = s.value_type == NC_NAT ? 3 : 1;  // Sparse (| Boolean)
    const int data_type = s.value_type == NC_NAT ? 0 : 4;
    nc_ok(nc_put_att_int(nc, NC_GLOBAL, "datasets", NC_INT, 1, &one));
    nc_ok(nc_put_att_text(nc, NC_GLOBAL, "name0", 4, "data"));
    nc_ok(nc_put_att_int(nc, NC_GLOBAL, "attributes0", NC_INT, 1, &attributes));
    nc_ok(nc_put_att_int(nc, NC_GLOBAL, "kind0", NC_INT, 1, &zero));
    nc_ok(nc_put_att_int(nc, NC_GLOBAL, "dataType0", NC_INT, 1, &data_type));
    nc_ok(nc_put_att_int(nc, NC_GLOBAL, "dimensions0", NC_INT, 1, &one));
    nc_ok(nc_put_att_int(nc, NC_GLOBAL, "width0", NC_INT, 1, &width));
    int rows_dim, data_dim;
    nc_ok(nc_def_dim(nc, "examplesDim0", s.unlimited ? NC_UNLIMITED : a.starts.size(), &rows_dim));
    nc_ok(
        nc_def_dim(nc, "sparseDataDim0", s.unlimited ? NC_UNLIMITED : a.indices.size(), &data_dim));
    const size_t rows = a.starts.size(), nnz = a.indices.size();
    const int start = define(nc, "sparseStart0", s.offset_type, rows_dim, rows, s);
    const int end = define(nc, "sparseEnd0", s.offset_type, rows_dim, rows, s);
    const int index = define(nc, "sparseIndex0", s.index_type, data_dim, nnz, s);
    int values = -1;
    if (s.value_type != NC_NAT) values = define(nc, "sparseData0", s.value_type, data_dim, nnz, s);
    nc_ok(nc_enddef(nc));
    const size_t zero_at = 0;
    if (rows > 0) {
        nc_ok(nc_put_vara_longlong(nc, start, &zero_at, &rows, a.starts.data()));
        nc_ok(nc_put_vara_longlong(nc, end, &zero_at, &rows, a.ends.data()));
    }
    if (nnz > 0) {
        nc_ok(nc_put_vara_longlong(nc, index, &zero_at, &nnz, a.indices.data()));
        if (values >= 0) nc_ok(nc_put_vara_double(nc, values, &zero_at, &nnz, a.values.data()));
    }
    nc_ok(nc_close(nc));
}

// Sets SPARSENET_PARALLEL_INFLATE=0 (the serial path) for its lifetime.
class SerialPath {
  public:
    SerialPath() { setenv("SPARSENET_PARALLEL_INFLATE", "0", 1); }
    ~SerialPath() { unsetenv("SPARSENET_PARALLEL_INFLATE"); }
};

// OpenMP's thread count for the calling thread for its lifetime.
class Threads {
  public:
    explicit Threads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
    ~Threads() { omp_set_num_threads(saved_); }

  private:
    int saved_;
};

// Reads `path` through the parallel path and the serial one: both must give the same dataset,
// and the parallel read must have taken the parallel path exactly when `parallel`.
Dataset read_both(const std::string& path, bool parallel, const std::string& what) {
    SCOPED_TRACE(what);
    Threads threads(2);
    const uint64_t before = io::parallel_inflate_reads();
    Dataset fast = Dataset::read(path);
    const uint64_t after = io::parallel_inflate_reads();
    if (parallel) {
        EXPECT_GT(after, before) << "the parallel path was not taken";
    } else {
        EXPECT_EQ(after, before) << "the parallel path was taken";
    }
    Dataset serial;
    {
        SerialPath serial_path;
        serial = Dataset::read(path);
    }
    EXPECT_EQ(io::parallel_inflate_reads(), after) << "SPARSENET_PARALLEL_INFLATE=0 was ignored";
    expect_same_dataset(fast, serial, what);
    return fast;
}

TEST(NetcdfChunks, WrittenFilesReadTheSameInParallel) {
    TempDir dir;
    for (const bool with_values : {false, true}) {
        const Dataset d =
            testing::random_dataset(3000, 500, RowShape::kPowerLaw, with_values, 5, "data");
        ASSERT_GT(d.nnz(), 20000u);
        const std::string path = dir.file(with_values ? "valued.nc" : "boolean.nc");
        write_datasets(path, {d});  // one chunk per variable: each is smaller than 1 M elements
        expect_same_dataset(read_both(path, true, path), d);
    }
}

TEST(NetcdfChunks, ChunkingsFiltersAndTypes) {
    TempDir dir;
    const Dataset valued = testing::random_dataset(2000, 700, RowShape::kPowerLaw, true, 6, "data");
    const Dataset boolean =
        testing::random_dataset(2000, 700, RowShape::kEmptyRows, false, 7, "data");
    struct Case {
        std::string what;
        Storage storage;
        bool parallel;
    };
    std::vector<Case> cases;
    for (const size_t chunk : {size_t{97}, size_t{1000}, size_t{4096}, size_t{1} << 20}) {
        Storage s;
        s.chunk = chunk;  // 97 and 1000: a partial last chunk; 1 M: one chunk smaller than that
        cases.push_back({"chunk " + std::to_string(chunk), s, true});
    }
    Storage s;
    s.chunk = 1000;
    s.shuffle = false;
    cases.push_back({"deflate only", s, true});
    s.shuffle = true;
    s.deflate = 0;
    cases.push_back({"shuffle only", s, true});
    s.shuffle = false;
    cases.push_back({"chunked, no filter", s, true});
    s.contiguous = true;
    cases.push_back({"contiguous (netCDF reads it)", s, false});
    s = Storage();
    s.unlimited = true;
    s.chunk = 4096;  // longer than sparseStart0; sparseIndex0 ends inside its last chunk
    cases.push_back({"unlimited dimensions, chunk 4096", s, true});
    s = Storage();
    s.chunk = 1000;
    s.fletcher32 = true;
    cases.push_back({"fletcher32 (netCDF reads it)", s, false});
    s = Storage();
    s.chunk = 999;
    s.offset_type = NC_INT64;
    s.index_type = NC_UINT64;
    cases.push_back({"int64 offsets, uint64 indices", s, true});
    s.offset_type = NC_UINT;
    s.index_type = NC_INT64;
    cases.push_back({"uint offsets, int64 indices", s, true});
    s.offset_type = NC_INT;
    s.index_type = NC_INT;
    cases.push_back({"int offsets, int indices", s, true});
    s.value_type = NC_DOUBLE;  // values through netCDF (converted to float), the rest in parallel
    cases.push_back({"double values", s, true});
    s = Storage();
    s.chunk = 1000;
    s.index_type = NC_USHORT;  // netCDF reads them
    s.offset_type = NC_SHORT;
    cases.push_back({"short types (netCDF reads them)", s, false});
    for (const int format : {0, NC_64BIT_OFFSET, NC_64BIT_DATA}) {
        s = Storage();
        s.format = format;
        s.offset_type = NC_INT;
        s.index_type = NC_INT;
        cases.push_back({"classic format " + std::to_string(format), s, false});
    }
    for (const Case& c : cases) {
        for (const Dataset* d : {&valued, &boolean}) {
            Storage storage = c.storage;
            if (d == &boolean) storage.value_type = NC_NAT;
            if (storage.offset_type == NC_SHORT && d->rows > 0 && d->nnz() > 32767) continue;
            const std::string path = dir.file("case.nc");
            write_arrays(path, arrays_of(*d), storage);
            const std::string what = c.what + (d == &boolean ? ", boolean" : ", valued");
            expect_same_dataset(read_both(path, c.parallel, what), *d, what);
        }
    }
}

TEST(NetcdfChunks, OneThreadReadsThroughNetcdf) {
    TempDir dir;
    const std::string path = dir.file("data.nc");
    const Dataset d = testing::random_dataset(500, 100, RowShape::kUniform, true, 8, "data");
    write_datasets(path, {d});
    Threads threads(1);
    const uint64_t before = io::parallel_inflate_reads();
    expect_same_dataset(Dataset::read(path), d);
    EXPECT_EQ(io::parallel_inflate_reads(), before);
}

// Invalid rows stored compressed: the parallel path reports them exactly as the serial one.
TEST(NetcdfChunks, SameErrorsAsTheSerialPath) {
    TempDir dir;
    const Dataset d = testing::random_dataset(300, 50, RowShape::kUniform, true, 9, "data");
    Storage s;
    s.chunk = 100;
    s.offset_type = NC_INT64;
    s.index_type = NC_INT;
    struct Case {
        std::string what;
        void (*damage)(Arrays&);
    };
    const std::vector<Case> cases = {
        {"index >= width", [](Arrays& a) { a.indices[a.indices.size() / 2] = a.width + 3; }},
        {"duplicate column",
         [](Arrays& a) {
             size_t r = 200;
             while (a.ends[r] - a.starts[r] < 2) ++r;
             a.indices[a.starts[r] + 1] = a.indices[a.starts[r]];
         }},
        {"end before start", [](Arrays& a) { a.ends[150] = a.starts[150] - 1; }},
        {"end beyond the data", [](Arrays& a) { a.ends.back() = a.indices.size() + 5; }},
        {"negative offset", [](Arrays& a) { a.starts[120] = -4; }},
        {"negative index", [](Arrays& a) { a.indices[a.indices.size() - 3] = -1; }},
        {"rows not back to back (valid)",
         [](Arrays& a) {
             a.starts[11] = a.starts[10];
             a.ends[11] = a.ends[10];
         }},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        Arrays a = arrays_of(d);
        c.damage(a);
        const std::string path = dir.file("bad.nc");
        write_arrays(path, a, s);
        Threads threads(2);
        std::string fast, serial;
        try {
            Dataset::read(path);
        } catch (const Error& e) {
            fast = e.what();
        }
        {
            SerialPath serial_path;
            try {
                Dataset::read(path);
            } catch (const Error& e) {
                serial = e.what();
            }
        }
        EXPECT_EQ(fast, serial);
        EXPECT_EQ(fast.empty(), c.what == "rows not back to back (valid)") << fast;
    }
}

// The file offset and stored size of chunk `index` of `var`, through HDF5.
void chunk_place(const std::string& path, const std::string& var, hsize_t offset, haddr_t& address,
                 hsize_t& size) {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hid_t dset = H5Dopen2(file, var.c_str(), H5P_DEFAULT);
    ASSERT_GE(dset, 0);
    unsigned mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(dset, &offset, &mask, &address, &size), 0);
    H5Dclose(dset);
    H5Fclose(file);
}

TEST(NetcdfChunks, CorruptChunkIsAnError) {
    TempDir dir;
    const Dataset d = testing::random_dataset(3000, 500, RowShape::kPowerLaw, true, 10, "data");
    const std::string good = dir.file("good.nc");
    Storage s;
    s.chunk = 4096;
    write_arrays(good, arrays_of(d), s);
    for (const std::string var : {"sparseIndex0", "sparseData0"}) {
        SCOPED_TRACE(var);
        haddr_t address = 0;
        hsize_t size = 0;
        chunk_place(good, var, 2 * 4096, address, size);
        ASSERT_GT(size, 64u);
        std::string bytes = testing::read_file(good);
        ASSERT_LE(address + size, bytes.size());
        for (hsize_t i = size / 2; i < size / 2 + 32; ++i) bytes[address + i] ^= 0x5a;
        const std::string path = dir.file("corrupt.nc");
        testing::write_file(path, bytes);

        Threads threads(2);
        const io::ChunkedFile chunks(path);
        ASSERT_TRUE(chunks.usable());
        std::vector<uint32_t> out(d.nnz());
        const io::ChunkElement element =
            var == "sparseIndex0" ? io::ChunkElement::kUInt32 : io::ChunkElement::kFloat32;
        EXPECT_FALSE(chunks.read(var, element, d.nnz(), 0, d.nnz(), out.data(), 2));

        const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kIo);
        EXPECT_TRUE(contains(msg, path)) << msg;
        EXPECT_TRUE(contains(msg, "'" + var + "'")) << msg;
        SerialPath serial_path;
        EXPECT_EQ(expect_error([&] { Dataset::read(path); }, ErrorCategory::kIo), msg);
    }
}

// ChunkedFile::read alone: ranges that start and end inside chunks, chunks never written (the
// fill value), each element type.
TEST(NetcdfChunks, RangesAndChunksNeverWritten) {
    TempDir dir;
    const std::string path = dir.file("vars.nc");
    const size_t n = 1000, chunk = 64;
    int nc, dim, u32, u64, f32, nofill;
    nc_ok(nc_create(path.c_str(), NC_NETCDF4 | NC_CLOBBER, &nc));
    nc_ok(nc_def_dim(nc, "n", n, &dim));
    nc_ok(nc_def_var(nc, "u32", NC_UINT, 1, &dim, &u32));
    nc_ok(nc_def_var(nc, "u64", NC_UINT64, 1, &dim, &u64));
    nc_ok(nc_def_var(nc, "f32", NC_FLOAT, 1, &dim, &f32));
    nc_ok(nc_def_var(nc, "nofill", NC_UINT, 1, &dim, &nofill));
    for (const int id : {u32, u64, f32, nofill}) {
        nc_ok(nc_def_var_chunking(nc, id, NC_CHUNKED, &chunk));
        nc_ok(nc_def_var_deflate(nc, id, 1, 1, 1));
    }
    const unsigned long long fill64 = 77;
    nc_ok(nc_def_var_fill(nc, u64, 0, &fill64));
    nc_ok(nc_def_var_fill(nc, nofill, 1, nullptr));
    nc_ok(nc_enddef(nc));
    // Chunks 0, 3-4 (and part of 5) and the last, partial one written; the others never.
    std::vector<unsigned long long> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = i * 2654435761u % 100000;
    for (const auto& [first, count] :
         std::vector<std::pair<size_t, size_t>>{{0, 64}, {192, 150}, {960, 40}}) {
        for (const int id : {u32, u64, f32, nofill}) {
            nc_ok(nc_put_vara_ulonglong(nc, id, &first, &count, values.data() + first));
        }
    }
    nc_ok(nc_close(nc));

    haddr_t address = 0;
    hsize_t size = 1;
    chunk_place(path, "u32", 2 * chunk, address, size);
    ASSERT_EQ(size, 0u) << "chunk 2 was written";

    nc_ok(nc_open(path.c_str(), NC_NOWRITE, &nc));
    const io::ChunkedFile chunks(path);
    ASSERT_TRUE(chunks.usable());
    const std::vector<std::pair<size_t, size_t>> ranges = {
        {0, n}, {5, 100}, {63, 2}, {999, 1}, {130, 20}, {64, 128}, {950, 50}, {0, 0}};
    for (const auto& [start, count] : ranges) {
        SCOPED_TRACE("range " + std::to_string(start) + " + " + std::to_string(count));
        std::vector<uint32_t> a(count + 1, 0xdeadbeef), b(count + 1, 0xdeadbeef);
        ASSERT_TRUE(chunks.read("u32", io::ChunkElement::kUInt32, n, start, count, a.data(), 2));
        if (count > 0) nc_ok(nc_get_vara_uint(nc, u32, &start, &count, b.data()));
        EXPECT_EQ(a, b);
        std::vector<uint64_t> c(count), e(count);
        ASSERT_TRUE(chunks.read("u64", io::ChunkElement::kUInt64, n, start, count, c.data(), 2));
        if (count > 0) {
            nc_ok(nc_get_vara_ulonglong(nc, u64, &start, &count,
                                        reinterpret_cast<unsigned long long*>(e.data())));
        }
        EXPECT_EQ(c, e);
        std::vector<float> f(count), g(count);
        ASSERT_TRUE(chunks.read("f32", io::ChunkElement::kFloat32, n, start, count, f.data(), 3));
        if (count > 0) nc_ok(nc_get_vara_float(nc, f32, &start, &count, g.data()));
        EXPECT_EQ(f, g);
    }
    std::vector<uint64_t> check(n);
    ASSERT_TRUE(chunks.read("u64", io::ChunkElement::kUInt64, n, 0, n, check.data(), 1));
    EXPECT_EQ(check[100], 77u);  // the fill value of a chunk never written
    EXPECT_EQ(check[500], 77u);
    EXPECT_EQ(check[10], values[10]);

    // What this reader does not take: read() says so, and nothing breaks.
    std::vector<uint64_t> out(n);
    EXPECT_FALSE(chunks.read("u32", io::ChunkElement::kUInt64, n, 0, n, out.data(), 2));  // type
    EXPECT_FALSE(chunks.read("u32", io::ChunkElement::kUInt32, n + 1, 0, n, out.data(), 2));
    EXPECT_FALSE(chunks.read("u32", io::ChunkElement::kUInt32, n, 990, 20, out.data(), 2));
    EXPECT_FALSE(chunks.read("missing", io::ChunkElement::kUInt32, n, 0, n, out.data(), 2));
    // No fill value (NC_NOFILL): HDF5 leaves a chunk never written as the buffer was.
    EXPECT_FALSE(chunks.read("nofill", io::ChunkElement::kUInt32, n, 0, n, out.data(), 2));
    std::vector<uint32_t> written(64);
    EXPECT_TRUE(chunks.read("nofill", io::ChunkElement::kUInt32, n, 0, 64, written.data(), 2));
    EXPECT_EQ(written[5], values[5]);
    nc_ok(nc_close(nc));

    const std::string classic = dir.file("classic.nc");
    nc_ok(nc_create(classic.c_str(), NC_CLOBBER, &nc));
    nc_ok(nc_close(nc));
    EXPECT_FALSE(io::ChunkedFile(classic).usable());
    EXPECT_FALSE(io::ChunkedFile(dir.file("absent.nc")).usable());
}

}  // namespace
}  // namespace sparsenet
