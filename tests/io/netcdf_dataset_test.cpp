// Reading and writing DSSTNE-layout netCDF dataset files; Dataset::validate.
#include <gtest/gtest.h>
#include <netcdf.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

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

// A dataset written with raw netCDF calls, in DSSTNE's style (NetCDFhelper.cpp).
struct RawDataset {
    std::string name = "data";
    unsigned attributes = 3;  // Sparse | Boolean
    unsigned data_type = 0;   // UInt
    unsigned width = 10;
    nc_type offset_type = NC_UINT;
    std::vector<long long> starts, ends;
    std::vector<long long> indices;
    nc_type index_type = NC_UINT;
    nc_type value_type = NC_NAT;  // NC_NAT: no sparseData variable
    std::vector<double> values;
    bool write_index = true;
    bool write_width = true;
};

void write_raw(const std::string& path, const std::vector<RawDataset>& datasets) {
    int nc;
    nc_ok(nc_create(path.c_str(), NC_NETCDF4 | NC_CLOBBER, &nc));
    const unsigned count = static_cast<unsigned>(datasets.size());
    nc_ok(nc_put_att_uint(nc, NC_GLOBAL, "datasets", NC_UINT, 1, &count));
    std::vector<int> start_ids, end_ids, index_ids, value_ids;
    for (size_t n = 0; n < datasets.size(); ++n) {
        const RawDataset& d = datasets[n];
        const std::string s = std::to_string(n);
        const unsigned zero = 0, one = 1;
        nc_ok(nc_put_att_text(nc, NC_GLOBAL, ("name" + s).c_str(), d.name.size(), d.name.c_str()));
        nc_ok(
            nc_put_att_uint(nc, NC_GLOBAL, ("attributes" + s).c_str(), NC_UINT, 1, &d.attributes));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("kind" + s).c_str(), NC_UINT, 1, &zero));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("dataType" + s).c_str(), NC_UINT, 1, &d.data_type));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("dimensions" + s).c_str(), NC_UINT, 1, &one));
        if (d.write_width) {
            nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("width" + s).c_str(), NC_UINT, 1, &d.width));
        }
        int examples_dim, data_dim, id;
        nc_ok(nc_def_dim(nc, ("examplesDim" + s).c_str(), d.starts.size(), &examples_dim));
        nc_ok(nc_def_dim(nc, ("sparseDataDim" + s).c_str(), d.indices.size(), &data_dim));
        nc_ok(nc_def_var(nc, ("sparseStart" + s).c_str(), d.offset_type, 1, &examples_dim, &id));
        start_ids.push_back(id);
        nc_ok(nc_def_var(nc, ("sparseEnd" + s).c_str(), d.offset_type, 1, &examples_dim, &id));
        end_ids.push_back(id);
        id = -1;
        if (d.write_index) {
            nc_ok(nc_def_var(nc, ("sparseIndex" + s).c_str(), d.index_type, 1, &data_dim, &id));
        }
        index_ids.push_back(id);
        id = -1;
        if (d.value_type != NC_NAT) {
            nc_ok(nc_def_var(nc, ("sparseData" + s).c_str(), d.value_type, 1, &data_dim, &id));
        }
        value_ids.push_back(id);
    }
    nc_ok(nc_enddef(nc));
    for (size_t n = 0; n < datasets.size(); ++n) {
        const RawDataset& d = datasets[n];
        nc_ok(nc_put_var_longlong(nc, start_ids[n], d.starts.data()));
        nc_ok(nc_put_var_longlong(nc, end_ids[n], d.ends.data()));
        if (index_ids[n] >= 0) nc_ok(nc_put_var_longlong(nc, index_ids[n], d.indices.data()));
        if (value_ids[n] >= 0) nc_ok(nc_put_var_double(nc, value_ids[n], d.values.data()));
    }
    nc_ok(nc_close(nc));
}

// A small valid DSSTNE-style dataset: 3 rows over width 10, contiguous, sorted.
RawDataset small_raw() {
    RawDataset d;
    d.starts = {0, 2, 2};
    d.ends = {2, 2, 5};
    d.indices = {1, 4, 0, 3, 9};
    return d;
}

std::vector<std::string> dir_entries(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        names.push_back(e.path().filename().string());
    }
    return names;
}

// ---------------------------------------------------------------- round trips

TEST(NetcdfDataset, RoundTripBoolean) {
    TempDir dir;
    const std::string path = dir.file("bool.nc");
    const Dataset d = testing::random_dataset(300, 777, RowShape::kPowerLaw, false, 1, "input");
    write_datasets(path, {d});
    expect_same_dataset(Dataset::read(path, "input"), d);
    expect_same_dataset(Dataset::read(path), d);

    // generateNetCDF's layout, exact width, 64-bit offsets, compression.
    int nc, varid, storage, shuffle, deflate, level;
    nc_ok(nc_open(path.c_str(), NC_NOWRITE, &nc));
    int format;
    nc_ok(nc_inq_format(nc, &format));
    EXPECT_EQ(format, NC_FORMAT_NETCDF4);
    unsigned value;
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "datasets", &value));
    EXPECT_EQ(value, 1u);
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "width0", &value));
    EXPECT_EQ(value, 777u);
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "attributes0", &value));
    EXPECT_EQ(value, 3u);
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "dataType0", &value));
    EXPECT_EQ(value, 0u);
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "kind0", &value));
    EXPECT_EQ(value, 0u);
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "dimensions0", &value));
    EXPECT_EQ(value, 1u);
    nc_type type;
    nc_ok(nc_inq_varid(nc, "sparseStart0", &varid));
    nc_ok(nc_inq_vartype(nc, varid, &type));
    EXPECT_EQ(type, NC_UINT64);
    nc_ok(nc_inq_varid(nc, "sparseIndex0", &varid));
    nc_ok(nc_inq_vartype(nc, varid, &type));
    EXPECT_EQ(type, NC_UINT);
    size_t chunk = 0;
    nc_ok(nc_inq_var_chunking(nc, varid, &storage, &chunk));
    EXPECT_EQ(storage, NC_CHUNKED);
    EXPECT_EQ(chunk, d.nnz());  // clamped to the variable length
    nc_ok(nc_inq_var_deflate(nc, varid, &shuffle, &deflate, &level));
    EXPECT_EQ(shuffle, 1);
    EXPECT_EQ(deflate, 1);
    EXPECT_EQ(level, 1);
    EXPECT_EQ(nc_inq_varid(nc, "sparseData0", &varid), NC_ENOTVAR);
    size_t len;
    int dimid;
    nc_ok(nc_inq_dimid(nc, "examplesDim0", &dimid));
    nc_ok(nc_inq_dimlen(nc, dimid, &len));
    EXPECT_EQ(len, 300u);
    nc_ok(nc_inq_dimid(nc, "sparseDataDim0", &dimid));
    nc_ok(nc_inq_dimlen(nc, dimid, &len));
    EXPECT_EQ(len, d.nnz());
    nc_ok(nc_close(nc));
}

TEST(NetcdfDataset, RoundTripAnalog) {
    TempDir dir;
    const std::string path = dir.file("analog.nc");
    const Dataset d = testing::random_dataset(200, 500, RowShape::kUniform, true, 2, "output");
    ASSERT_FALSE(d.is_boolean());
    write_datasets(path, {d});
    const Dataset r = Dataset::read(path);
    expect_same_dataset(r, d);
    EXPECT_FALSE(r.is_boolean());

    int nc, varid;
    unsigned value;
    nc_type type;
    nc_ok(nc_open(path.c_str(), NC_NOWRITE, &nc));
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "attributes0", &value));
    EXPECT_EQ(value, 1u);
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "dataType0", &value));
    EXPECT_EQ(value, 4u);
    nc_ok(nc_inq_varid(nc, "sparseData0", &varid));
    nc_ok(nc_inq_vartype(nc, varid, &type));
    EXPECT_EQ(type, NC_FLOAT);
    nc_ok(nc_close(nc));
}

TEST(NetcdfDataset, SeveralDatasetsInOneFile) {
    TempDir dir;
    const std::string path = dir.file("multi.nc");
    const Dataset a = testing::random_dataset(50, 100, RowShape::kUniform, false, 3, "input");
    const Dataset b = testing::random_dataset(50, 64, RowShape::kPowerLaw, true, 4, "output");
    const Dataset c = testing::random_dataset(50, 7, RowShape::kOneNonzero, false, 5, "extra");
    write_datasets(path, {a, b, c});

    EXPECT_EQ(list_datasets(path), (std::vector<std::string>{"input", "output", "extra"}));
    const std::vector<Dataset> all = read_datasets(path);
    ASSERT_EQ(all.size(), 3u);
    expect_same_dataset(all[0], a);
    expect_same_dataset(all[1], b);
    expect_same_dataset(all[2], c);
    expect_same_dataset(Dataset::read(path, "output"), b);
    expect_same_dataset(Dataset::read(path, "extra"), c);
    expect_same_dataset(Dataset::read(path, ""), a);
}

TEST(NetcdfDataset, EmptyRows) {
    TempDir dir;
    const std::string path = dir.file("empty_rows.nc");
    const Dataset d = testing::random_dataset(100, 30, RowShape::kEmptyRows, true, 6);
    ASSERT_EQ(d.row_length(0), 0u);
    write_datasets(path, {d});
    expect_same_dataset(Dataset::read(path), d);
}

TEST(NetcdfDataset, ZeroNonzeroAndZeroRowDatasets) {
    TempDir dir;
    const std::string path = dir.file("zero.nc");
    Dataset empty_bool;
    empty_bool.name = "nothing";
    empty_bool.rows = 5;
    empty_bool.cols = 10;
    empty_bool.offsets.assign(6, 0);
    Dataset no_rows;
    no_rows.name = "no_rows";
    no_rows.cols = 3;
    const Dataset after = testing::random_dataset(20, 10, RowShape::kUniform, true, 7, "after");
    write_datasets(path, {empty_bool, no_rows, after});

    const std::vector<Dataset> all = read_datasets(path);
    ASSERT_EQ(all.size(), 3u);
    expect_same_dataset(all[0], empty_bool);
    EXPECT_TRUE(all[0].is_boolean());
    expect_same_dataset(all[1], no_rows);
    EXPECT_EQ(all[1].offsets, std::vector<uint64_t>{0});
    expect_same_dataset(all[2], after);

    // An empty file (no datasets) writes and lists, but read() has nothing to return.
    const std::string none = dir.file("none.nc");
    write_datasets(none, {});
    EXPECT_TRUE(list_datasets(none).empty());
    EXPECT_TRUE(read_datasets(none).empty());
    const std::string msg = expect_error([&] { Dataset::read(none); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, none)) << msg;
}

TEST(NetcdfDataset, LargeRandomDataset) {
    TempDir dir;
    const std::string path = dir.file("large.nc");
    const Dataset d = testing::random_dataset(40000, 30000, RowShape::kPowerLaw, true, 8, "big");
    ASSERT_GT(d.nnz(), 1000000u);  // spans more than one 1 M-element chunk
    const auto t0 = std::chrono::steady_clock::now();
    write_datasets(path, {d});
    const auto t1 = std::chrono::steady_clock::now();
    const Dataset r = Dataset::read(path);
    const auto t2 = std::chrono::steady_clock::now();
    expect_same_dataset(r, d);
    std::printf(
        "large dataset: %llu nnz, write %.3f s, read %.3f s, file %.1f MB\n",
        static_cast<unsigned long long>(d.nnz()), std::chrono::duration<double>(t1 - t0).count(),
        std::chrono::duration<double>(t2 - t1).count(), std::filesystem::file_size(path) / 1e6);
}

TEST(NetcdfDataset, WriteReplacesExistingFileAndLeavesNoTemporary) {
    TempDir dir;
    const std::string path = dir.file("data.nc");
    testing::write_file(path, "old contents");
    const Dataset d = testing::random_dataset(10, 10, RowShape::kUniform, false, 9);
    write_datasets(path, {d});
    expect_same_dataset(Dataset::read(path), d);
    EXPECT_EQ(dir_entries(dir.path()), std::vector<std::string>{"data.nc"});
}

// ---------------------------------------------------------------- DSSTNE-style files

TEST(NetcdfDataset, ReadsDsstneStyleBooleanFile) {
    TempDir dir;
    const std::string path = dir.file("dsstne.nc");
    RawDataset raw;
    raw.name = "input";
    raw.width = 128;  // generateNetCDF pads the width to a multiple of 128
    // Rows stored in reverse order with a gap; row 1 empty; unsorted indices.
    //   data: [x x | 7 2 5 | 100 3]
    raw.indices = {99, 98, 7, 2, 5, 100, 3};
    raw.starts = {5, 3, 2};
    raw.ends = {7, 3, 5};
    write_raw(path, {raw});

    const Dataset d = Dataset::read(path);
    EXPECT_EQ(d.name, "input");
    EXPECT_EQ(d.rows, 3u);
    EXPECT_EQ(d.cols, 128u);
    EXPECT_TRUE(d.is_boolean());
    EXPECT_EQ(d.offsets, (std::vector<uint64_t>{0, 2, 2, 5}));
    EXPECT_EQ(d.indices, (std::vector<uint32_t>{3, 100, 2, 5, 7}));
    d.validate("test");
}

TEST(NetcdfDataset, ReadsDsstneStyleAnalogFileWithOtherTypes) {
    TempDir dir;
    const std::string path = dir.file("analog.nc");
    RawDataset raw;
    raw.name = "ratings";
    raw.attributes = 1;  // Sparse
    raw.data_type = 5;   // Double
    raw.offset_type = NC_INT;
    raw.index_type = NC_INT64;
    raw.starts = {3, 0};
    raw.ends = {5, 3};
    raw.indices = {9, 1, 4, 8, 6};
    raw.value_type = NC_DOUBLE;
    raw.values = {0.9, 0.1, 0.4, 0.8, 0.6};
    write_raw(path, {raw});

    const Dataset d = Dataset::read(path, "ratings");
    EXPECT_EQ(d.offsets, (std::vector<uint64_t>{0, 2, 5}));
    EXPECT_EQ(d.indices, (std::vector<uint32_t>{6, 8, 1, 4, 9}));
    EXPECT_EQ(d.values, (std::vector<float>{0.6f, 0.8f, 0.1f, 0.4f, 0.9f}));
}

TEST(NetcdfDataset, BooleanAttributeWinsOverSparseData) {
    TempDir dir;
    const std::string path = dir.file("b.nc");
    RawDataset raw = small_raw();
    raw.value_type = NC_FLOAT;
    raw.values = {1, 2, 3, 4, 5};
    RawDataset analog_without_values = small_raw();
    analog_without_values.name = "novalues";
    analog_without_values.attributes = 1;
    write_raw(path, {raw, analog_without_values});
    EXPECT_TRUE(Dataset::read(path, "data").is_boolean());
    EXPECT_TRUE(Dataset::read(path, "novalues").is_boolean());
}

// ---------------------------------------------------------------- errors

TEST(NetcdfDatasetErrors, MissingFile) {
    TempDir dir;
    const std::string path = dir.file("does_not_exist.nc");
    std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "No such file")) << msg;
    msg = expect_error([&] { list_datasets(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(NetcdfDatasetErrors, GarbageFile) {
    TempDir dir;
    const std::string path = dir.file("garbage.nc");
    testing::write_file(path, std::string(4096, 'x') + "this is not a netCDF file\n");
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "NetCDF")) << msg;  // netCDF's own message
}

TEST(NetcdfDatasetErrors, TruncatedFile) {
    TempDir dir;
    const std::string good = dir.file("good.nc");
    const std::string path = dir.file("truncated.nc");
    write_datasets(good, {testing::random_dataset(5000, 2000, RowShape::kPowerLaw, true, 10)});
    const std::string bytes = testing::read_file(good);
    ASSERT_GT(bytes.size(), 10000u);
    testing::write_file(path, bytes.substr(0, bytes.size() / 2));
    const std::string msg = expect_error([&] { read_datasets(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "truncated or corrupt")) << msg;
}

TEST(NetcdfDatasetErrors, CorruptData) {
    TempDir dir;
    const std::string good = dir.file("good.nc");
    const std::string path = dir.file("corrupt.nc");
    write_datasets(good, {testing::random_dataset(5000, 2000, RowShape::kPowerLaw, true, 10)});
    std::string bytes = testing::read_file(good);
    ASSERT_GT(bytes.size(), 20000u);
    for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 4096; ++i) bytes[i] ^= 0x5a;
    testing::write_file(path, bytes);
    const std::string msg = expect_error([&] { read_datasets(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "NetCDF")) << msg;
}

TEST(NetcdfDatasetErrors, NotADatasetFile) {
    TempDir dir;
    const std::string path = dir.file("plain.nc");
    int nc;
    nc_ok(nc_create(path.c_str(), NC_NETCDF4, &nc));
    nc_ok(nc_close(nc));
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "'datasets'")) << msg;
}

TEST(NetcdfDatasetErrors, MissingSparseIndex) {
    TempDir dir;
    const std::string path = dir.file("noindex.nc");
    RawDataset raw = small_raw();
    raw.write_index = false;
    write_raw(path, {raw});
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "dataset data")) << msg;
    EXPECT_TRUE(contains(msg, "missing variable 'sparseIndex0'")) << msg;
    // list_datasets reads only attributes, so it still works.
    EXPECT_EQ(list_datasets(path), std::vector<std::string>{"data"});
}

TEST(NetcdfDatasetErrors, MissingWidth) {
    TempDir dir;
    const std::string path = dir.file("nowidth.nc");
    RawDataset raw = small_raw();
    raw.write_width = false;
    write_raw(path, {raw});
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "missing global attribute 'width0'")) << msg;
}

TEST(NetcdfDatasetErrors, IndexOutOfRange) {
    TempDir dir;
    const std::string path = dir.file("range.nc");
    RawDataset raw = small_raw();
    raw.indices = {1, 4, 0, 3, 10};  // row 2 holds 10 with width 10
    write_raw(path, {raw});
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "dataset data")) << msg;
    EXPECT_TRUE(contains(msg, "row 2")) << msg;
    EXPECT_TRUE(contains(msg, "10 >= width 10")) << msg;
}

TEST(NetcdfDatasetErrors, DuplicateColumnInRow) {
    TempDir dir;
    const std::string path = dir.file("dup.nc");
    RawDataset raw = small_raw();
    raw.indices = {1, 4, 9, 3, 9};  // row 2: 9, 3, 9
    write_raw(path, {raw});
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "row 2")) << msg;
    EXPECT_TRUE(contains(msg, "duplicate column 9")) << msg;
}

TEST(NetcdfDatasetErrors, EndBeforeStartAndEndBeyondData) {
    TempDir dir;
    const std::string path = dir.file("ends.nc");
    RawDataset raw = small_raw();
    raw.starts = {0, 2, 4};
    raw.ends = {2, 1, 5};
    write_raw(path, {raw});
    std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "row 1: sparseEnd 1 < sparseStart 2")) << msg;

    raw.starts = {0, 2, 2};
    raw.ends = {2, 2, 6};
    write_raw(path, {raw});
    msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, "row 2: sparseEnd 6 is beyond the 5 stored nonzeros")) << msg;
}

TEST(NetcdfDatasetErrors, NegativeOffset) {
    TempDir dir;
    const std::string path = dir.file("negative.nc");
    RawDataset raw = small_raw();
    raw.offset_type = NC_INT;
    raw.starts = {0, -2, 2};
    write_raw(path, {raw});
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "sparseStart0")) << msg;
    EXPECT_TRUE(contains(msg, "-2")) << msg;
}

TEST(NetcdfDatasetErrors, UnknownDatasetName) {
    TempDir dir;
    const std::string path = dir.file("names.nc");
    write_datasets(path, {testing::random_dataset(4, 4, RowShape::kUniform, false, 1, "input"),
                          testing::random_dataset(4, 4, RowShape::kUniform, false, 2, "output")});
    const std::string msg =
        expect_error([&] { Dataset::read(path, "target"); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "'target'")) << msg;
    EXPECT_TRUE(contains(msg, "input, output")) << msg;
}

TEST(NetcdfDatasetErrors, DenseDatasetWithoutDataVariable) {
    TempDir dir;
    const std::string path = dir.file("dense.nc");
    RawDataset raw = small_raw();  // sparse variables only, but no Sparse attribute
    raw.name = "pixels";
    raw.attributes = 0;
    write_raw(path, {raw});
    const std::string msg = expect_error([&] { Dataset::read(path); }, ErrorCategory::kData);
    EXPECT_EQ(msg, path + ": dataset pixels: missing variable 'data0'");
}

TEST(NetcdfDatasetErrors, WriteIntoMissingDirectory) {
    TempDir dir;
    const std::string missing = dir.file("no/such/dir");
    const std::string path = missing + "/out.nc";
    const std::string msg = expect_error(
        [&] {
            write_datasets(path, {testing::random_dataset(5, 5, RowShape::kUniform, false, 1)});
        },
        ErrorCategory::kIo);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "does not exist")) << msg;
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(missing));
    EXPECT_TRUE(dir_entries(dir.path()).empty());
}

TEST(NetcdfDatasetErrors, WriteRejectsInvalidDatasetAndLeavesNothing) {
    TempDir dir;
    const std::string path = dir.file("bad.nc");
    Dataset d = testing::random_dataset(5, 5, RowShape::kOneNonzero, false, 1, "broken");
    d.indices[3] = 5;  // == cols
    const std::string msg = expect_error([&] { write_datasets(path, {d}); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "dataset broken: row 3")) << msg;
    EXPECT_TRUE(dir_entries(dir.path()).empty());

    const Dataset a = testing::random_dataset(5, 5, RowShape::kUniform, false, 1, "same");
    expect_error([&] { write_datasets(path, {a, a}); }, ErrorCategory::kData);
    EXPECT_TRUE(dir_entries(dir.path()).empty());
}

// ---------------------------------------------------------------- Dataset::validate

TEST(DatasetValidate, AcceptsValidData) {
    testing::random_dataset(100, 50, RowShape::kEmptyRows, true, 1).validate("ctx");
    Dataset empty;
    empty.validate("ctx");
}

TEST(DatasetValidate, ReportsFirstViolation) {
    Dataset good;  // 10 rows of 3 columns each
    good.name = "d";
    good.rows = 10;
    good.cols = 20;
    for (uint32_t r = 0; r < 10; ++r) {
        for (uint32_t c : {0u, 1 + r % 5, 10 + r % 7}) {
            good.indices.push_back(c);
            good.values.push_back(0.5f * c);
        }
        good.offsets.push_back(good.indices.size());
    }
    good.validate("ok");
    auto check = [](const Dataset& d, const std::string& expected) {
        const std::string msg = expect_error([&] { d.validate("file.nc"); }, ErrorCategory::kData);
        EXPECT_TRUE(contains(msg, "file.nc: dataset d: ")) << msg;
        EXPECT_TRUE(contains(msg, expected)) << msg << " (expected " << expected << ")";
    };
    Dataset d = good;
    d.offsets.pop_back();
    check(d, "offsets has 10 entries; expected rows + 1 = 11");
    d = good;
    d.values.pop_back();
    check(d, "values has");
    d = good;
    d.indices.push_back(1);
    check(d, "expected the number of indices");
    d = good;
    d.indices[d.offsets[4]] = 20;
    check(d, "row 4: column index 20 >= cols 20");
    d = good;
    d.indices[d.offsets[6] + 1] = d.indices[d.offsets[6]];
    check(d, "row 6: duplicate column");
    d = good;
    std::swap(d.indices[d.offsets[7]], d.indices[d.offsets[7] + 1]);
    check(d, "row 7: column indices not increasing");
    d = good;
    d.offsets[3] = d.offsets[2] - 1;
    check(d, "row 2: offsets decrease (6 then 5)");
    d = good;
    d.offsets[0] = 1;
    check(d, "offsets[0] is 1");
}

}  // namespace
}  // namespace sparsenet
