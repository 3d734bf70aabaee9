// Inputs the fuzzers of tests/fuzz found crashing (or exhausting memory), kept under
// tests/fuzz/regressions/<target>/ and fed byte for byte to the API their fuzzer calls: each must
// now be refused with a sparsenet::Error. docs/reliability.md ("Fuzzing") tells their story.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_convert_case.h"
#include "sparsenet/config.h"
#include "sparsenet/convert.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/network.h"
#include "support/test_support.h"

// Under AddressSanitizer (the asan preset), an impossible malloc/calloc must return NULL as it
// does without ASan: netCDF-C then reports NC_ENOMEM for the corrupt headers below, where ASan's
// default would abort the process. Allocations over 1 GiB return NULL too: ASan's calloc touches
// the 4 GiB that netCDF-C asks for below (2 GB resident, seconds), where glibc's stays lazy. A
// failed C++ `new` is still reported.
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
    options.comm = "local";
    return options;
}

// fuzz_dataset: a classic (CDF-1) header whose first dimension name claims 4 GiB. netCDF-C
// callocs that much (lazily) before finding the file too short; nc_open then fails.
TEST(FuzzRegression, DatasetHeaderWithA4GiBName) {
    const std::string path = kRegressions + "fuzz_dataset/netcdf-header-4gb-string.netcdf";
    const std::string message =
        expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(message, "netcdf-header-4gb-string.netcdf")) << message;
    expect_error([&] { (void)list_datasets(path); }, ErrorCategory::kIo);
    expect_error([&] { (void)read_dataset_shape(path); }, ErrorCategory::kIo);
    expect_error([&] { (void)Dataset::read_columns(path, "", 0, 1); }, ErrorCategory::kIo);
}

// fuzz_dataset: CDF-5 files declaring more entries than a std::vector can hold: reserve/resize
// threw std::length_error out of read_datasets (an "internal error" of `sparsenet info`). The
// public readers now turn it, and std::bad_alloc, into Error(kIo) naming the file.
TEST(FuzzRegression, DatasetDeclaringMoreThanAVectorHolds) {
    for (const char* name : {"length-error-vector-reserve", "length-error-vector-size"}) {
        const std::string path = kRegressions + "fuzz_dataset/" + name + ".netcdf";
        const std::string message =
            expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
        EXPECT_TRUE(contains(message, "declares more data than memory can hold")) << message;
    }
}

// fuzz_dataset: an Indexed dataset whose index variable claims about 2^55 examples; read_datasets
// allocates them (std::bad_alloc, now Error(kIo)). Under ASan a failed `new` is a report, not an
// exception, so the test needs a build without it.
TEST(FuzzRegression, DatasetWithAnOversizeIndexVariable) {
#ifdef SPARSENET_FUZZ_REGRESSION_ASAN
    GTEST_SKIP() << "a failed operator new is an AddressSanitizer report";
#endif
    const std::string path = kRegressions + "fuzz_dataset/oversize-index-variable.netcdf";
    const std::string message =
        expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(message, "declares more data than memory can hold")) << message;
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
#ifdef SPARSENET_FUZZ_REGRESSION_ASAN
        if (contains(path, "/oversize-")) continue;  // see DatasetWithAnOversizeIndexVariable
#endif
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
