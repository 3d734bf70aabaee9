// io::check_netcdf_header (src/io/netcdf_header_check.cpp): every classic-format file netCDF-C
// writes is accepted; truncated and corrupted headers are refused with Error(kIo) naming the
// file, before nc_open (whose header reader crashes on them: docs/reliability.md, finding 4).
#include <gtest/gtest.h>
#include <netcdf.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/netcdf_header_check.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

namespace fs = std::filesystem;
using io::check_netcdf_header;
using testing::contains;
using testing::expect_error;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

void nc(int status, const std::string& what) {
    if (status != NC_NOERR) throw std::runtime_error(what + ": " + nc_strerror(status));
}

// nc_open's status for the file (closed again).
int nc_open_status(const std::string& path) {
    int id = -1;
    const int status = nc_open(path.c_str(), NC_NOWRITE, &id);
    if (status == NC_NOERR) nc_close(id);
    return status;
}

// Expects the header check to refuse the file with Error(kIo) naming it and saying `part`.
void expect_refused(const std::string& path, const std::string& part) {
    const std::string message =
        expect_error([&] { check_netcdf_header(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(message, path + ": corrupt netCDF header: ")) << message;
    EXPECT_TRUE(contains(message, part)) << "expected '" << part << "' in: " << message;
    EXPECT_TRUE(contains(message, "(byte ")) << message;
}

// ------------------------------------------------------------ files written by netCDF-C

// The classic formats netCDF-C writes: NC_CLASSIC_MODEL alone is CDF-1 too.
struct Format {
    const char* name;
    int mode;
    bool cdf5;
};
const Format kFormats[] = {{"cdf1", 0, false},
                           {"classic_model", NC_CLASSIC_MODEL, false},
                           {"cdf2", NC_64BIT_OFFSET, false},
                           {"cdf5", NC_64BIT_DATA, true}};

// How a test file is written.
struct Variant {
    size_t records = 0;           // records written to the record variables
    bool no_fill = false;         // NC_NOFILL and nothing written
    bool spaced = false;          // nc__enddef with free header space and 512-byte alignment
    bool one_record_var = false;  // a single byte record variable (records unpadded)
    bool redef = false;  // reopened for writing and grown (header moved) after the first close
};

// Writes a file of every type (the CDF-5 ones in CDF-5), with text, numeric and empty
// attributes, _FillValue attributes, scalar, 1-D and 2-D fixed-size variables, record variables
// and an unlimited dimension.
void write_netcdf_c_file(const std::string& path, const Format& format, const Variant& v) {
    int id;
    nc(nc_create(path.c_str(), NC_CLOBBER | format.mode, &id), "creating " + path);
    if (v.no_fill) {
        int old;
        nc(nc_set_fill(id, NC_NOFILL, &old), "nc_set_fill");
    }
    int rec, n, m, unused;
    nc(nc_def_dim(id, "time", NC_UNLIMITED, &rec), "dim");
    nc(nc_def_dim(id, "n", 3, &n), "dim");
    nc(nc_def_dim(id, "m", 5, &m), "dim");
    nc(nc_def_dim(id, "unused_dimension", 7, &unused), "dim");
    const std::string title = "header check test";
    nc(nc_put_att_text(id, NC_GLOBAL, "title", title.size(), title.c_str()), "att");
    nc(nc_put_att_text(id, NC_GLOBAL, "empty_text", 0, ""), "att");
    const int ints[3] = {1, -2, 3};
    nc(nc_put_att_int(id, NC_GLOBAL, "ints", NC_INT, 3, ints), "att");
    nc(nc_put_att_int(id, NC_GLOBAL, "no_ints", NC_INT, 0, ints), "att");
    const signed char odd_bytes[5] = {1, 2, 3, 4, 5};
    nc(nc_put_att_schar(id, NC_GLOBAL, "odd_bytes", NC_BYTE, 5, odd_bytes), "att");

    std::vector<nc_type> types = {NC_BYTE, NC_CHAR, NC_SHORT, NC_INT, NC_FLOAT, NC_DOUBLE};
    if (format.cdf5) {
        for (nc_type t : {NC_UBYTE, NC_USHORT, NC_UINT, NC_INT64, NC_UINT64}) types.push_back(t);
    }
    std::vector<int> fixed, records;
    if (v.one_record_var) {
        int var;
        const int dims[1] = {rec};
        nc(nc_def_var(id, "only_record", NC_BYTE, 1, dims, &var), "var");
        records.push_back(var);
    }
    for (size_t t = 0; t < types.size(); ++t) {
        const std::string s = std::to_string(types[t]);
        int var;
        nc(nc_def_var(id, ("scalar_" + s).c_str(), types[t], 0, nullptr, &var), "var");
        fixed.push_back(var);
        const int one[1] = {n};
        nc(nc_def_var(id, ("vector_" + s).c_str(), types[t], 1, one, &var), "var");
        fixed.push_back(var);
        const int two[2] = {m, n};
        nc(nc_def_var(id, ("matrix_" + s).c_str(), types[t], 2, two, &var), "var");
        fixed.push_back(var);
        const double fill_value = 42;
        if (types[t] != NC_CHAR) {
            nc(nc_put_att_double(id, var, _FillValue, types[t], 1, &fill_value), "fill");
        } else {
            nc(nc_put_att_text(id, var, _FillValue, 1, "*"), "fill");
        }
        nc(nc_put_att_text(id, var, "units", 1, "m"), "att");
        if (!v.one_record_var) {
            const int rdims[2] = {rec, n};
            nc(nc_def_var(id, ("record_" + s).c_str(), types[t], 2, rdims, &var), "var");
            records.push_back(var);
        }
    }
    if (v.spaced) {
        nc(nc__enddef(id, 100, 512, 0, 512), "nc__enddef");
    } else {
        nc(nc_enddef(id), "nc_enddef");
    }
    if (!v.no_fill) {
        std::vector<double> values(64);
        for (size_t i = 0; i < values.size(); ++i) values[i] = double(i % 50);
        for (int var : fixed) {
            nc_type type;
            nc(nc_inq_vartype(id, var, &type), "type");
            if (type == NC_CHAR) {
                nc(nc_put_var_text(id, var, "abcdefghijklmnopqrstuvwxyz"), "put");
            } else {
                nc(nc_put_var_double(id, var, values.data()), "put");
            }
        }
        for (size_t r = 0; r < v.records; ++r) {
            for (int var : records) {
                nc_type type;
                int ndims;
                nc(nc_inq_vartype(id, var, &type), "type");
                nc(nc_inq_varndims(id, var, &ndims), "ndims");
                const size_t start[2] = {r, 0}, count[2] = {1, 3};
                if (type == NC_CHAR) {
                    nc(nc_put_vara_text(id, var, start, count, "xyz"), "put");
                } else {
                    nc(nc_put_vara_double(id, var, start, count, values.data()), "put");
                }
            }
        }
    }
    nc(nc_close(id), "closing " + path);

    if (v.redef) {
        nc(nc_open(path.c_str(), NC_WRITE, &id), "reopening " + path);
        nc(nc_redef(id), "nc_redef");
        const std::string history = std::string(300, 'h');
        nc(nc_put_att_text(id, NC_GLOBAL, "history", history.size(), history.c_str()), "att");
        int var;
        const int one[1] = {m};
        nc(nc_def_var(id, "added_later", NC_DOUBLE, 1, one, &var), "var");
        nc(nc_enddef(id), "nc_enddef");
        const double later[5] = {1, 2, 3, 4, 5};
        nc(nc_put_var_double(id, var, later), "put");
        nc(nc_close(id), "closing " + path);
    }
}

std::vector<Variant> variants() {
    std::vector<Variant> out;
    for (size_t records : {0, 1, 3}) {
        Variant v;
        v.records = records;
        out.push_back(v);
        v.spaced = true;
        out.push_back(v);
        v.spaced = false;
        v.one_record_var = true;
        out.push_back(v);
        v.one_record_var = false;
        v.redef = true;
        out.push_back(v);
    }
    Variant no_fill;
    no_fill.no_fill = true;
    out.push_back(no_fill);
    return out;
}

std::string variant_name(const Format& format, const Variant& v) {
    return std::string(format.name) + "_records" + std::to_string(v.records) +
           (v.no_fill ? "_nofill" : "") + (v.spaced ? "_spaced" : "") +
           (v.one_record_var ? "_one_record_var" : "") + (v.redef ? "_redef" : "") + ".nc";
}

// Every variant in every format: (path, whether its data runs to the end of the file).
std::vector<std::string> write_all(const TempDir& dir) {
    std::vector<std::string> paths;
    for (const Format& format : kFormats) {
        for (const Variant& v : variants()) {
            const std::string path = dir.file(variant_name(format, v));
            write_netcdf_c_file(path, format, v);
            paths.push_back(path);
        }
    }
    return paths;
}

TEST(NetcdfHeaderCheck, AcceptsEveryClassicFileNetcdfCWrites) {
    TempDir dir;
    const std::vector<std::string> paths = write_all(dir);
    ASSERT_EQ(paths.size(), 4u * 13u);
    for (const std::string& path : paths) {
        EXPECT_EQ(nc_open_status(path), NC_NOERR) << path;
        EXPECT_NO_THROW(check_netcdf_header(path)) << path;
    }
}

TEST(NetcdfHeaderCheck, AcceptsEveryFileWithoutRecordsOrVariables) {
    TempDir dir;
    for (const Format& format : kFormats) {
        // Nothing at all; only dimensions; an unlimited dimension and record variables that
        // never got a record.
        const std::string empty = dir.file(std::string(format.name) + "_empty.nc");
        int id, d, var;
        nc(nc_create(empty.c_str(), NC_CLOBBER | format.mode, &id), "create");
        nc(nc_close(id), "close");
        const std::string dims = dir.file(std::string(format.name) + "_dims.nc");
        nc(nc_create(dims.c_str(), NC_CLOBBER | format.mode, &id), "create");
        nc(nc_def_dim(id, "time", NC_UNLIMITED, &d), "dim");
        nc(nc_def_dim(id, "x", 1, &d), "dim");
        nc(nc_close(id), "close");
        const std::string no_records = dir.file(std::string(format.name) + "_no_records.nc");
        nc(nc_create(no_records.c_str(), NC_CLOBBER | format.mode, &id), "create");
        nc(nc_def_dim(id, "time", NC_UNLIMITED, &d), "dim");
        nc(nc_def_var(id, "t", NC_DOUBLE, 1, &d, &var), "var");
        nc(nc_def_var(id, "s", NC_SHORT, 1, &d, &var), "var");
        nc(nc_close(id), "close");
        for (const std::string& path : {empty, dims, no_records}) {
            EXPECT_EQ(nc_open_status(path), NC_NOERR) << path;
            EXPECT_NO_THROW(check_netcdf_header(path)) << path;
        }
    }
}

// The committed fuzz seeds (classic, CDF-5 and HDF5 files written by sparsenet and ncgen): the
// classic ones pass, the HDF5 ones are not looked into.
TEST(NetcdfHeaderCheck, AcceptsTheFuzzSeeds) {
    int seen = 0;
    for (const char* target : {"fuzz_dataset", "fuzz_model"}) {
        const fs::path dir = fs::path(SPARSENET_SOURCE_DIR) / "tests/fuzz/corpus" / target;
        for (const auto& entry : fs::directory_iterator(dir)) {
            if (entry.path().extension() != ".netcdf") continue;
            const std::string path = entry.path().string();
            EXPECT_EQ(nc_open_status(path), NC_NOERR) << path;
            EXPECT_NO_THROW(check_netcdf_header(path)) << path;
            ++seen;
        }
    }
    EXPECT_GE(seen, 9);
}

// Other files get no verdict: nc_open reports them as before.
TEST(NetcdfHeaderCheck, LeavesOtherFilesToNetcdfC) {
    TempDir dir;
    EXPECT_NO_THROW(check_netcdf_header(dir.file("missing.nc")));
    for (const std::string& bytes :
         {std::string(), std::string("CDF"), std::string("CDF\x03", 4) + std::string(60, '\0'),
          std::string("\x89HDF\r\n\x1a\n", 8) + std::string(100, '\x01'),
          std::string("hello, world\n")}) {
        const std::string path = dir.file("other.nc");
        write_file(path, bytes);
        EXPECT_NO_THROW(check_netcdf_header(path)) << bytes.size();
        EXPECT_NE(nc_open_status(path), NC_NOERR);
        expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
    }
}

// Every truncation of a netCDF-C file that cuts into its header or data is refused (only the
// last variable's padding, at most 3 bytes, may go).
TEST(NetcdfHeaderCheck, RefusesEveryTruncation) {
    TempDir dir;
    const char* stride_env = std::getenv("SPARSENET_TRUNCATION_STRIDE");
    const size_t stride = stride_env != nullptr ? std::max(1, std::atoi(stride_env)) : 1;
    int checked = 0;
    for (const Format& format : kFormats) {
        for (const Variant& v : variants()) {
            if (v.records != 3 || v.no_fill) continue;  // data to the end of the file
            const std::string path = dir.file(variant_name(format, v));
            write_netcdf_c_file(path, format, v);
            const std::string bytes = read_file(path);
            const std::string cut = dir.file("cut-" + variant_name(format, v));
            write_file(cut, bytes);
            EXPECT_NO_THROW(check_netcdf_header(cut)) << variant_name(format, v);
            // Every length up to 2 KB (the headers are 1 to 2.5 KB), then every 7th; the copy is
            // shortened in place, longest first (rewriting a file thousands of times makes the
            // file system flush it each time). Under ASan (make test's second pass) every
            // stride-th of those: 170 s of the pass's 435 s otherwise; the Release pass checks
            // them all.
            std::vector<size_t> lengths;
            for (size_t length = 0; length + 3 < bytes.size();
                 length += (length < 2048 ? 1 : 7) * stride) {
                lengths.push_back(length);
            }
            for (auto it = lengths.rbegin(); it != lengths.rend(); ++it) {
                const size_t length = *it;
                fs::resize_file(cut, length);
                if (length < 4) {
                    EXPECT_NO_THROW(check_netcdf_header(cut));
                    continue;
                }
                const std::string message =
                    expect_error([&] { check_netcdf_header(cut); }, ErrorCategory::kIo);
                ASSERT_TRUE(contains(message, cut + ": corrupt netCDF header: "))
                    << variant_name(format, v) << " cut to " << length << ": " << message;
                ++checked;
            }
        }
    }
    EXPECT_GT(checked, int(10000 / stride));
}

// ------------------------------------------------------------ hand-made headers

// A small file built field by field, with the offset of each field kept by name so a test can
// corrupt it. Sizes follow the version: counts 4 bytes (8 in CDF-5), begin 4 bytes in CDF-1.
class Builder {
  public:
    explicit Builder(int version) : version_(version) {
        bytes_ = std::string("CDF") + char(version);
    }
    int version() const { return version_; }
    std::string& bytes() { return bytes_; }
    size_t at(const std::string& field) const { return fields_.at(field); }

    Builder& u32(uint64_t v, const std::string& field = "") { return put(v, 4, field); }
    Builder& u64(uint64_t v, const std::string& field = "") { return put(v, 8, field); }
    Builder& count(uint64_t v, const std::string& field = "") {
        return put(v, version_ == 5 ? 8 : 4, field);
    }
    Builder& offset(uint64_t v, const std::string& field = "") {
        return put(v, version_ == 1 ? 4 : 8, field);
    }
    Builder& name(const std::string& s, const std::string& field = "") {
        count(s.size(), field);
        bytes_ += s;
        return pad();
    }
    Builder& raw(const std::string& s) {
        bytes_ += s;
        return *this;
    }
    Builder& pad() {
        while (bytes_.size() % 4 != 0) bytes_ += '\0';
        return *this;
    }
    // Overwrites the field's count-sized (or `bytes`-sized) value.
    void set(const std::string& field, uint64_t v, unsigned bytes = 0) {
        if (bytes == 0) bytes = version_ == 5 ? 8 : 4;
        for (unsigned i = 0; i < bytes; ++i) {
            bytes_[at(field) + i] = char(v >> (8 * (bytes - 1 - i)));
        }
    }

  private:
    Builder& put(uint64_t v, unsigned n, const std::string& field) {
        if (!field.empty()) fields_[field] = bytes_.size();
        for (unsigned i = 0; i < n; ++i) bytes_ += char(v >> (8 * (n - 1 - i)));
        return *this;
    }

    int version_;
    std::string bytes_;
    std::map<std::string, size_t> fields_;
};

// numrecs 2; dimensions rows = 3, time (unlimited); a global text attribute; variables
// x(rows) float with a units attribute, r(time, rows) short and s(time) int; data after the
// header. Fields: numrecs, dims, dim0.name, dim0.length, dim1.length, gatts.tag, gatt0.type,
// gatt0.nelems, vars, var<i>.name/.ndims/.dimid<d>/.atts.tag/.type/.vsize/.begin.
Builder base_file(int version) {
    Builder b(version);
    b.count(2, "numrecs");
    b.u32(0x0A, "dims.tag").count(2, "dims").name("rows", "dim0.name").count(3, "dim0.length");
    b.name("time", "dim1.name").count(0, "dim1.length");
    b.u32(0x0C, "gatts.tag").count(1, "gatts").name("title", "gatt0.name");
    b.u32(NC_CHAR, "gatt0.type").count(5, "gatt0.nelems").raw("hello").pad();
    b.u32(0x0B, "vars.tag").count(3, "vars");
    // x(rows) float: 12 bytes
    b.name("x", "var0.name").count(1, "var0.ndims").count(0, "var0.dimid0");
    b.u32(0x0C, "var0.atts.tag").count(1, "var0.atts").name("units", "var0.att0.name");
    b.u32(NC_CHAR, "var0.att0.type").count(1, "var0.att0.nelems").raw("m").pad();
    b.u32(NC_FLOAT, "var0.type").count(12, "var0.vsize").offset(0, "var0.begin");
    // r(time, rows) short: 6 bytes per record, 8 padded
    b.name("r", "var1.name").count(2, "var1.ndims").count(1, "var1.dimid0").count(0, "var1.dimid1");
    b.u32(0, "var1.atts.tag").count(0, "var1.atts");
    b.u32(NC_SHORT, "var1.type").count(8, "var1.vsize").offset(0, "var1.begin");
    // s(time) int: 4 bytes per record
    b.name("s", "var2.name").count(1, "var2.ndims").count(1, "var2.dimid0");
    b.u32(0, "var2.atts.tag").count(0, "var2.atts");
    b.u32(NC_INT, "var2.type").count(4, "var2.vsize").offset(0, "var2.begin");
    const uint64_t header = b.bytes().size();
    const unsigned offset_bytes = version == 1 ? 4 : 8;
    b.set("var0.begin", header, offset_bytes);
    b.set("var1.begin", header + 12, offset_bytes);
    b.set("var2.begin", header + 12 + 8, offset_bytes);
    b.raw(std::string(12 + 2 * 12, '\x01'));  // x, then 2 records of 12 bytes (r, s)
    return b;
}

class HandMade : public ::testing::TestWithParam<int> {
  protected:
    // Writes the builder's bytes and expects them refused, saying `part`.
    void refused(Builder& b, const std::string& part) {
        const std::string path = dir_.file("corrupt-cdf" + std::to_string(b.version()) + ".nc");
        write_file(path, b.bytes());
        expect_refused(path, part);
        // The public readers refuse it the same way, before nc_open.
        const std::string message =
            expect_error([&] { (void)read_datasets(path); }, ErrorCategory::kIo);
        EXPECT_TRUE(contains(message, "corrupt netCDF header")) << message;
    }
    void accepted(Builder& b) {
        const std::string path = dir_.file("valid-cdf" + std::to_string(b.version()) + ".nc");
        write_file(path, b.bytes());
        EXPECT_NO_THROW(check_netcdf_header(path));
        EXPECT_EQ(nc_open_status(path), NC_NOERR);
    }

    TempDir dir_;
};

// The base file is valid: netCDF-C opens it and reads what the builder meant.
TEST_P(HandMade, BaseFileIsValid) {
    Builder b = base_file(GetParam());
    accepted(b);
    const std::string path = dir_.file("base.nc");
    write_file(path, b.bytes());
    int id, ndims, nvars, natts, unlimited;
    nc(nc_open(path.c_str(), NC_NOWRITE, &id), "open");
    nc(nc_inq(id, &ndims, &nvars, &natts, &unlimited), "inq");
    size_t records = 0;
    nc(nc_inq_dimlen(id, unlimited, &records), "dimlen");
    short r[6];
    nc(nc_get_var_short(id, 1, r), "get");
    nc_close(id);
    EXPECT_EQ(ndims, 2);
    EXPECT_EQ(nvars, 3);
    EXPECT_EQ(natts, 1);
    EXPECT_EQ(unlimited, 1);
    EXPECT_EQ(records, 2u);
    EXPECT_EQ(r[5], 0x0101);
}

TEST_P(HandMade, RefusesListTags) {
    Builder b = base_file(GetParam());
    b.set("dims.tag", 0x0B, 4);
    refused(b, "dim_list: tag 11 with 2 elements; expected NC_DIMENSION (10)");
    b = base_file(GetParam());
    b.set("gatts.tag", 0, 4);
    refused(b, "global attribute list (att_list): tag 0 with 1 elements");
    // An empty list may carry its own tag (netCDF-C tolerates it), not another.
    b = base_file(GetParam());
    b.set("var1.atts.tag", 0x0C, 4);
    accepted(b);
    b.set("var1.atts.tag", 0x0A, 4);
    refused(b, "tag 10; expected ABSENT (0) or NC_ATTRIBUTE (12)");
}

TEST_P(HandMade, RefusesCountsTheFileCannotHold) {
    Builder b = base_file(GetParam());
    b.set("dims", 0x7FFFFFFF);
    refused(b, "dim_list: count 2147483647 is more than the rest of the file");
    b = base_file(GetParam());
    b.set("gatts", 1000);
    refused(b, "count 1000 is more than the rest of the file");
    b = base_file(GetParam());
    b.set("vars", 20);
    refused(b, "var_list: count 20 is more than the rest of the file");
    b = base_file(GetParam());
    b.set("gatt0.nelems", 0xFFFFFFFF);
    refused(b, "global attribute 'title': 4294967295 values of 1 bytes run past the end");
    b = base_file(GetParam());
    b.set("var0.att0.type", NC_DOUBLE, 4);
    b.set("var0.att0.nelems", 100);
    refused(b, "100 values of 8 bytes run past the end of the file");
    b = base_file(GetParam());
    b.set("var0.ndims", 1025);
    refused(b, "variable 'x': 1025 dimensions; netCDF allows at most NC_MAX_VAR_DIMS (1024)");
}

TEST_P(HandMade, RefusesBadNames) {
    Builder b = base_file(GetParam());
    b.set("dim0.name", 0xFFFFFFF0);
    refused(b, "dimension #0: name length 4294967280 runs past the end of the file");
    b = base_file(GetParam());
    b.set("var1.name", 0);
    refused(b, "variable #1 has an empty name");
    b = base_file(GetParam());
    b.bytes()[b.at("gatt0.name") + (GetParam() == 5 ? 8 : 4) + 2] = '\0';
    refused(b, "global attribute #0: the name 'ti\\x00le' contains a NUL byte");
    // A name over NC_MAX_NAME bytes (netCDF-C never writes one; callers read names into
    // NC_MAX_NAME + 1 byte buffers).
    Builder l(GetParam());
    l.count(0).u32(0x0A).count(1).name(std::string(NC_MAX_NAME + 1, 'n')).count(3);
    l.u32(0).count(0).u32(0).count(0);
    refused(l, "dimension #0: name length 257 is over NC_MAX_NAME (256)");
    Builder ok(GetParam());
    ok.count(0).u32(0x0A).count(1).name(std::string(NC_MAX_NAME, 'n')).count(3);
    ok.u32(0).count(0).u32(0).count(0);
    accepted(ok);
}

TEST_P(HandMade, RefusesDuplicateNames) {
    Builder b = base_file(GetParam());
    b.bytes().replace(b.at("dim1.name") + (GetParam() == 5 ? 8 : 4), 4, "rows");
    refused(b, "dimension 'rows': a second dimension of that name");
    b = base_file(GetParam());
    b.bytes().replace(b.at("var2.name") + (GetParam() == 5 ? 8 : 4), 1, "r");
    refused(b, "variable 'r': a second variable of that name");
    // Two attributes of one name in one list; the same name in two lists is fine.
    Builder a(GetParam());
    a.count(0).u32(0).count(0).u32(0x0C).count(2);
    a.name("units").u32(NC_CHAR).count(1).raw("m").pad();
    a.name("units").u32(NC_CHAR).count(1).raw("s").pad();
    a.u32(0).count(0);
    refused(a, "global attribute 'units': a second attribute of that name");
}

TEST_P(HandMade, RefusesTypes) {
    Builder b = base_file(GetParam());
    b.set("gatt0.type", NC_STRING, 4);
    refused(b, "global attribute 'title': type 12 is not a classic-format netCDF type");
    b = base_file(GetParam());
    b.set("var2.type", 0, 4);
    refused(b, "variable 's': type 0 is not a classic-format netCDF type");
    b = base_file(GetParam());
    b.set("var0.type", 0x7FFFFFFF, 4);
    refused(b, "type 2147483647 is not a classic-format netCDF type");
    b = base_file(GetParam());
    b.set("var2.type", NC_UINT, 4);
    if (GetParam() == 5) {
        accepted(b);
    } else {
        refused(b, "variable 's': type uint (9) exists only in CDF-5 files; this is CDF-" +
                       std::to_string(GetParam()));
    }
}

TEST_P(HandMade, RefusesDimensionIds) {
    Builder b = base_file(GetParam());
    b.set("var0.dimid0", 2);
    refused(b, "variable 'x': dimension id 2 is out of range (the file has 2 dimensions)");
    b = base_file(GetParam());
    b.set("var0.dimid0", ~uint64_t{0});
    refused(b, "variable 'x': dimension id -1 is out of range");
    // The unlimited dimension only first.
    b = base_file(GetParam());
    b.set("var1.dimid0", 0);
    b.set("var1.dimid1", 1);
    refused(b, "variable 'r': the unlimited dimension 'time' is its dimension #1");
    // A second unlimited dimension.
    b = base_file(GetParam());
    b.set("dim0.length", 0);
    refused(b, "dimension 'time' is a second unlimited (length 0) dimension; 'rows' is one");
}

TEST_P(HandMade, RefusesNegativeSizes) {
    Builder b = base_file(GetParam());
    if (GetParam() == 5) {
        b.set("numrecs", uint64_t{1} << 63);
        refused(b, "numrecs 9223372036854775808 is negative");
        b = base_file(GetParam());
        b.set("dim0.length", uint64_t{1} << 63);
        refused(b, "dimension 'rows': length 9223372036854775808 is negative");
        b = base_file(GetParam());
        b.set("var0.begin", ~uint64_t{0} - 5, 8);
        refused(b, "variable 'x': begin 18446744073709551610 is negative as a signed 64-bit");
    } else if (GetParam() == 1) {
        b.set("var0.begin", 0x80000000u, 4);
        refused(b, "variable 'x': begin 2147483648 is negative as a signed 32-bit offset");
    } else {
        b.set("var0.begin", uint64_t{1} << 63, 8);
        refused(b, "begin 9223372036854775808 is negative as a signed 64-bit offset");
    }
}

TEST_P(HandMade, RefusesVsizeAndBegin) {
    Builder b = base_file(GetParam());
    b.set("var0.vsize", 16);
    refused(b, "variable 'x': vsize 16 does not match 12 bytes (its shape and type)");
    b = base_file(GetParam());
    b.set("var1.vsize", 6);  // unpadded: taken
    accepted(b);
    b.set("var1.vsize", 12);
    refused(b, "variable 'r': vsize 12 does not match 8 bytes per record");
    const unsigned offset_bytes = GetParam() == 1 ? 4 : 8;
    // Data inside the header, overlapping, out of order, past the end of the file.
    b = base_file(GetParam());
    b.set("var0.begin", 8, offset_bytes);
    refused(b, "variable 'x' begins at byte 8, before the end of the header");
    b = base_file(GetParam());
    const uint64_t x_begin = b.bytes().size() - 36;
    b.set("var1.begin", x_begin + 12 + 4, offset_bytes);
    refused(b, "variable 's' begins at byte " + std::to_string(x_begin + 12 + 8) +
                   ", before the end of variable 'r' (byte " +
                   std::to_string(x_begin + 12 + 4 + 8));
    b = base_file(GetParam());
    b.set("var1.begin", x_begin + 8, offset_bytes);
    refused(b, "variable 'r' begins at byte " + std::to_string(x_begin + 8) +
                   ", before the end of variable 'x' (byte " + std::to_string(x_begin + 12));
    b = base_file(GetParam());
    b.set("var0.begin", x_begin + 1000, offset_bytes);
    refused(b, "the data of variable 'x' (12 bytes at byte " + std::to_string(x_begin + 1000) +
                   ") runs past the end of the file");
}

TEST_P(HandMade, RefusesRecordsPastTheEnd) {
    Builder b = base_file(GetParam());
    b.set("numrecs", 3);
    refused(b, "numrecs is 3, but the last record of variable 'r' (12 bytes per record");
    // Records cut short: the file ends inside the last one.
    b = base_file(GetParam());
    b.bytes().resize(b.bytes().size() - 4);
    refused(b, "numrecs is 2, but the last record of variable 's'");
    // STREAMING: netCDF-C 4.9.0 does not implement it and takes it as a count.
    b = base_file(GetParam());
    b.set("numrecs", GetParam() == 5 ? ~uint64_t{0} : 0xFFFFFFFFu);
    refused(b, "numrecs is STREAMING, which netCDF-C takes as");
    // Without record data STREAMING and any numrecs are harmless.
    Builder s(GetParam());
    s.count(GetParam() == 5 ? ~uint64_t{0} : 0xFFFFFFFFu).u32(0x0A).count(1).name("t").count(0);
    s.u32(0).count(0).u32(0).count(0);
    accepted(s);
}

// netCDF-C's limits on variable sizes in CDF-1 and CDF-2 (NC_check_vlens) and CDF-5 (2^63 bytes),
// checked before the data's place in the file.
TEST_P(HandMade, RefusesOversizeVariablesWhereNetcdfCDoes) {
    if (GetParam() == 5) {
        // CDF-5's limit: sizes must fit in netCDF-C's signed 64-bit offsets.
        Builder b(5);
        b.count(0).u32(0x0A).count(1).name("big").count(uint64_t{1} << 62).u32(0).count(0);
        b.u32(0x0B).count(1);
        b.name("a").count(1).count(0).u32(0).count(0).u32(NC_FLOAT).count(0).offset(200);
        refused(b,
                "variable 'a': its size (the product of its dimensions times 4 bytes) is more "
                "than 2^63 bytes");
        return;
    }
    const uint64_t big = GetParam() == 1 ? 0x20000000 : 0x40000000;  // floats: 2 or 4 GiB
    Builder b(GetParam());
    b.count(0).u32(0x0A).count(1).name("big").count(big).u32(0).count(0);
    b.u32(0x0B).count(2);
    const uint64_t vsize = big * 4 > 0xFFFFFFFCu ? 0xFFFFFFFFu : big * 4;
    b.name("a").count(1).count(0).u32(0).count(0).u32(NC_FLOAT).count(vsize).offset(200);
    b.name("b").count(0).u32(0).count(0).u32(NC_FLOAT).count(4).offset(300);
    refused(b, "variable 'a': " + std::to_string(big * 4) + " bytes is over CDF-" +
                   std::to_string(GetParam()) + "'s limit");
    // The same variable last is allowed: then only the file's size refuses it.
    Builder last(GetParam());
    last.count(0).u32(0x0A).count(1).name("big").count(big).u32(0).count(0);
    last.u32(0x0B).count(1);
    last.name("a").count(1).count(0).u32(0).count(0).u32(NC_FLOAT).count(vsize).offset(100);
    refused(last, "the data of variable 'a' (" + std::to_string(big * 4) +
                      " bytes at byte 100) runs past the end of the file");
}

INSTANTIATE_TEST_SUITE_P(Versions, HandMade, ::testing::Values(1, 2, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                             return "CDF" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace sparsenet
