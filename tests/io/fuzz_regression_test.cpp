// Inputs the fuzzers of tests/fuzz found crashing (or exhausting memory), kept under
// tests/fuzz/regressions/<target>/ and fed byte for byte to the API their fuzzer calls: each must
// now be refused with a sparsenet::Error. docs/reliability.md ("Fuzzing") tells their story.
#include <gtest/gtest.h>
#include <netcdf.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_convert_case.h"
#include "io/model_file.h"
#include "io/netcdf_header_check.h"
#include "sparsenet/config.h"
#include "sparsenet/convert.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/network.h"
#include "support/test_support.h"

// Under AddressSanitizer (the asan preset), an impossible malloc/calloc must return NULL as it
// does without ASan: netCDF-C reports NC_ENOMEM where ASan's default would abort the process.
// Allocations over 1 GiB return NULL too (ASan's calloc touches what it returns, glibc's stays
// lazy). A failed C++ `new` is still reported. The classic-format headers below no longer reach
// netCDF-C (io::check_netcdf_header refuses them first); HDF5 files still do.
#if defined(__SANITIZE_ADDRESS__)
#define SPARSENET_FUZZ_REGRESSION_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPARSENET_FUZZ_REGRESSION_ASAN 1
#endif
#endif
#ifdef SPARSENET_FUZZ_REGRESSION_ASAN
extern "C" const char* __asan_default_options() {
    return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}
#endif

namespace sparsenet {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::expect_error;
using testing::TempDir;

const std::string kRegressions = std::string(SPARSENET_SOURCE_DIR) + "/tests/fuzz/regressions/";

std::vector<std::string> inputs_of(const std::string& target) {
    std::vector<std::string> paths;
    if (!fs::is_directory(kRegressions + target)) return paths;
    for (const auto& entry : fs::directory_iterator(kRegressions + target)) {
        if (entry.is_regular_file()) paths.push_back(entry.path().string());
    }
    return paths;
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

NetworkOptions cpu_options() {
    NetworkOptions options;
    options.device = "cpu";
    options.threads = 1;
    options.comm = CommKind::kLocal;
    return options;
}

// fuzz_dataset: a classic (CDF-1) header whose first dimension name claims 4 GiB. netCDF-C
// callocs that much (lazily) before finding the file too short; the header check now refuses it
// before nc_open.
TEST(FuzzRegression, DatasetHeaderWithA4GiBName) {
    const std::string path = kRegressions + "fuzz_dataset/netcdf-header-4gb-string.netcdf";
    const std::string message =
        expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(message,
                         "netcdf-header-4gb-string.netcdf: corrupt netCDF header: "
                         "dimension #0: name length 4294901760 runs past the end"))
        << message;
    expect_error([&] { (void)list_datasets(path); }, ErrorCategory::kIo);
    expect_error([&] { (void)read_dataset_shape(path); }, ErrorCategory::kIo);
    expect_error([&] { (void)Dataset::read_columns(path, "", 0, 1); }, ErrorCategory::kIo);
}

// fuzz_dataset: CDF-5 files declaring more entries than a std::vector can hold: reserve/resize
// threw std::length_error out of read_datasets (an "internal error" of `sparsenet info`). The
// public readers turn it, and std::bad_alloc, into Error(kIo) naming the file. These two files
// declare dimensions of more than 2^63 entries, which the header check now refuses before
// nc_open; an HDF5 (netCDF-4) file, which the check does not look into and which can declare any
// length without storing it, still reaches the reader's conversion.
TEST(FuzzRegression, DatasetDeclaringMoreThanAVectorHolds) {
    for (const char* name : {"length-error-vector-reserve", "length-error-vector-size"}) {
        const std::string path = kRegressions + "fuzz_dataset/" + name + ".netcdf";
        const std::string message =
            expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
        EXPECT_TRUE(contains(message, "corrupt netCDF header: dimension")) << message;
        EXPECT_TRUE(contains(message, "is negative")) << message;
    }

    // A netCDF-4 sparse dataset of 3 rows whose sparseIndex0 has 2^61 entries, one more than a
    // std::vector<uint32_t> can hold (chunked, none written).
    TempDir dir;
    const std::string path = dir.file("huge-index.nc");
    const auto ok = [](int status) { ASSERT_EQ(status, NC_NOERR) << nc_strerror(status); };
    int nc, rows, entries, start, end, index;
    ok(nc_create(path.c_str(), NC_NETCDF4 | NC_CLOBBER, &nc));
    const unsigned one = 1, zero = 0, sparse_boolean = 3, width = 10;
    ok(nc_put_att_uint(nc, NC_GLOBAL, "datasets", NC_UINT, 1, &one));
    ok(nc_put_att_text(nc, NC_GLOBAL, "name0", 4, "data"));
    ok(nc_put_att_uint(nc, NC_GLOBAL, "attributes0", NC_UINT, 1, &sparse_boolean));
    ok(nc_put_att_uint(nc, NC_GLOBAL, "kind0", NC_UINT, 1, &zero));
    ok(nc_put_att_uint(nc, NC_GLOBAL, "dataType0", NC_UINT, 1, &zero));
    ok(nc_put_att_uint(nc, NC_GLOBAL, "dimensions0", NC_UINT, 1, &one));
    ok(nc_put_att_uint(nc, NC_GLOBAL, "width0", NC_UINT, 1, &width));
    ok(nc_def_dim(nc, "examplesDim0", 3, &rows));
    ok(nc_def_dim(nc, "sparseDataDim0", size_t{1} << 61, &entries));
    ok(nc_def_var(nc, "sparseStart0", NC_UINT, 1, &rows, &start));
    ok(nc_def_var(nc, "sparseEnd0", NC_UINT, 1, &rows, &end));
    ok(nc_def_var(nc, "sparseIndex0", NC_UINT, 1, &entries, &index));
    const size_t chunk = 1024;
    ok(nc_def_var_chunking(nc, index, NC_CHUNKED, &chunk));
    ok(nc_enddef(nc));
    const unsigned starts[3] = {0, 1, 2}, ends[3] = {1, 2, 3};
    ok(nc_put_var_uint(nc, start, starts));
    ok(nc_put_var_uint(nc, end, ends));
    ok(nc_close(nc));
    EXPECT_NO_THROW(io::check_netcdf_header(path));
    const std::string message =
        expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(message, path + ": the file declares more data than memory can hold"))
        << message;
}

// fuzz_dataset: an Indexed dataset whose index variable claims about 2^55 examples; read_datasets
// allocated them (std::bad_alloc, turned into Error(kIo) as above). Its header claims a dimension
// name with a NUL byte, so the header check now refuses it before anything is allocated (under
// ASan too, where a failed `new` is a report).
TEST(FuzzRegression, DatasetWithAnOversizeIndexVariable) {
    const std::string path = kRegressions + "fuzz_dataset/oversize-index-variable.netcdf";
    const std::string message =
        expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(message, "corrupt netCDF header: dimension #3: the name")) << message;
}

// fuzz_dataset and fuzz_model: classic-format headers that crashed netCDF-C 4.9.0 inside nc_open
// (docs/reliability.md, finding 4; the name says where). io::check_netcdf_header refuses each
// before nc_open, through every public reader.
TEST(FuzzRegression, NetcdfCHeaderCrashesAreRefusedBeforeNcOpen) {
    const std::vector<std::string> dataset_inputs = {"netcdf-c-fpe-NC_check_vlen",
                                                     "netcdf-c-heap-buffer-overflow-nc_get_NC",
                                                     "netcdf-c-negative-memcpy-ncx_pad_getn_text",
                                                     "netcdf-c-segv-NC_check_vlens",
                                                     "netcdf-c-segv-NC_hashmapadd",
                                                     "netcdf-c-segv-NC_hashmapfree",
                                                     "netcdf-c-segv-ncx_getn_longlong_int"};
    const auto expect_header_error = [](const std::string& path, const std::function<void()>& f) {
        const std::string message = expect_error(f, ErrorCategory::kIo);
        EXPECT_TRUE(contains(message, path + ": corrupt netCDF header: ")) << message;
    };
    for (const std::string& name : dataset_inputs) {
        const std::string path = kRegressions + "fuzz_dataset/" + name + ".netcdf";
        ASSERT_TRUE(fs::is_regular_file(path)) << path;
        expect_header_error(path, [&] { (void)read_datasets(path); });
        expect_header_error(path, [&] { (void)list_datasets(path); });
        expect_header_error(path, [&] { (void)read_dataset_shape(path); });
        expect_header_error(path, [&] { (void)Dataset::read_columns(path, "", 0, 1); });
        expect_header_error(path, [&] { (void)io::is_model_file(path); });
    }
    const std::string model =
        kRegressions + "fuzz_model/netcdf-c-ncx_pad_getn_text-memcpy-size-minus-1.netcdf";
    ASSERT_TRUE(fs::is_regular_file(model)) << model;
    expect_header_error(model, [&] { (void)Network::load(model, cpu_options()); });
    expect_header_error(model, [&] { (void)io::is_model_file(model); });
}

// fuzz_model: a CDF-5 header whose first dimension name claims about 8 * 10^18 bytes.
TEST(FuzzRegression, ModelHeaderWithAnImpossibleName) {
    const std::string path = kRegressions + "fuzz_model/netcdf-header-huge-string.netcdf";
    const std::string message =
        expect_error([&] { (void)Network::load(path, cpu_options()); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(message, "netcdf-header-huge-string.netcdf")) << message;
}

// fuzz_convert (its first byte picks the reader; 7 = index file):
// "1\xeaF<NUL><TAB>1\n0<TAB>881250949\n..." made read_index size its table by the largest index
// (881 M labels, 28 GB) at line 2, before reaching the malformed line 3. The index is now checked
// without a table sized by any index.
TEST(FuzzRegression, IndexFileWithAHugeIndex) {
    const std::string bytes = read_bytes(kRegressions + "fuzz_convert/index-huge-allocation.bin");
    ASSERT_EQ(bytes.size(), 48u);
    ASSERT_EQ(bytes[0], '\x07');
    TempDir dir;
    const std::string path = dir.file("index.txt");
    std::ofstream(path, std::ios::binary) << bytes.substr(1);
    const std::string message = expect_error([&] { (void)read_index(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(message, "index.txt:3: expected 'label<TAB>index'")) << message;
    expect_error([&] { (void)LabelIndex::read(path); }, ErrorCategory::kData);

    // The largest index alone: an error naming the first missing index, nothing allocated for it.
    std::ofstream(path, std::ios::binary | std::ios::trunc) << "a\t1\nb\t4294967295\n";
    const std::string gap = expect_error([&] { (void)read_index(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(gap, "index 0 has no label; expected indices 0..4294967295")) << gap;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << "b\t1\na\t0\n";
    EXPECT_EQ(read_index(path), (std::vector<std::string>{"a", "b"}));
}

// Every kept input, including any added later, through its fuzzer's first API: only
// sparsenet::Error may come out.
TEST(FuzzRegression, EveryKeptInputIsRefusedWithAnError) {
    for (const std::string& path : inputs_of("fuzz_dataset")) {
        EXPECT_THROW((void)read_datasets(path), Error) << path;
    }
    for (const std::string& path : inputs_of("fuzz_model")) {
        EXPECT_THROW((void)Network::load(path, cpu_options()), Error) << path;
    }
    TempDir dir;
    for (const std::string& path : inputs_of("fuzz_convert")) {
        const std::string bytes = read_bytes(path);
        ASSERT_FALSE(bytes.empty()) << path;
        const std::string text = dir.file("input.txt");
        std::ofstream(text, std::ios::binary | std::ios::trunc) << bytes.substr(1);
        sparsenet_fuzz::ConvertCase c = sparsenet_fuzz::convert_case(uint8_t(bytes[0]));
        if (c.index_file) {
            EXPECT_THROW((void)read_index(text), Error) << path;
        } else {
            EXPECT_THROW((void)convert_text({text}, "data", c.options, c.samples, c.features),
                         Error)
                << path;
        }
    }
    for (const std::string& path : inputs_of("fuzz_config")) {
        EXPECT_THROW((void)NetworkConfig::from_json(read_bytes(path)), Error) << path;
    }
}

}  // namespace
}  // namespace sparsenet
