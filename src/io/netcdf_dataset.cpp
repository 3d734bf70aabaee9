// Reading and writing DSSTNE-layout netCDF dataset files (see docs/data-format.md).
#include <netcdf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/netcdf_util.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

using io::nc_check;
using io::NcFile;

// DSSTNE's dataset attribute bits (NNEnum.h).
constexpr uint64_t kAttrSparse = 1;
constexpr uint64_t kAttrBoolean = 2;
constexpr uint64_t kAttrSparseIgnoreZero = 32;
constexpr uint64_t kAttrIndexed = 64;
constexpr uint64_t kAttrWeighted = 128;

// DSSTNE's dataType values.
constexpr uint32_t kTypeUInt = 0;
constexpr uint32_t kTypeFloat = 4;

constexpr size_t kChunkElements = size_t{1} << 20;

std::string indexed(const char* base, size_t n) {
    return base + std::to_string(n);
}

bool is_integer_type(nc_type t) {
    switch (t) {
        case NC_BYTE:
        case NC_UBYTE:
        case NC_SHORT:
        case NC_USHORT:
        case NC_INT:
        case NC_UINT:
        case NC_INT64:
        case NC_UINT64:
            return true;
        default:
            return false;
    }
}

bool is_unsigned_type(nc_type t) {
    return t == NC_UBYTE || t == NC_USHORT || t == NC_UINT || t == NC_UINT64;
}

bool is_numeric_type(nc_type t) {
    return is_integer_type(t) || t == NC_FLOAT || t == NC_DOUBLE;
}

const char* type_name(nc_type t) {
    switch (t) {
        case NC_BYTE:
            return "byte";
        case NC_CHAR:
            return "char";
        case NC_SHORT:
            return "short";
        case NC_INT:
            return "int";
        case NC_FLOAT:
            return "float";
        case NC_DOUBLE:
            return "double";
        case NC_UBYTE:
            return "ubyte";
        case NC_USHORT:
            return "ushort";
        case NC_UINT:
            return "uint";
        case NC_INT64:
            return "int64";
        case NC_UINT64:
            return "uint64";
        case NC_STRING:
            return "string";
        default:
            return "user-defined type";
    }
}

// One open dataset file being read. `label` names the dataset in messages.
class Reader {
  public:
    explicit Reader(const std::string& path) : path_(path) {
        const int status = nc_open(path.c_str(), NC_NOWRITE, file_.out());
        nc_check(status, path,
                 status == NC_ENOTNC || status == NC_EHDFERR
                     ? "cannot open (not a netCDF file, or truncated or corrupt)"
                     : "cannot open");
    }

    const std::string& path() const { return path_; }

    [[noreturn]] void data_error(const std::string& label, const std::string& what) const {
        throw Error(ErrorCategory::kData, path_ + ": " + label + what);
    }

    // Number of datasets from the global `datasets` attribute.
    size_t dataset_count() const {
        return static_cast<size_t>(uint_att("", "datasets", /*required=*/true, 0));
    }

    std::string name_of(size_t n) const {
        return text_att("dataset #" + std::to_string(n) + ": ", indexed("name", n));
    }

    std::vector<std::string> names() const {
        const size_t count = dataset_count();
        std::vector<std::string> result;
        result.reserve(count);
        for (size_t n = 0; n < count; ++n) result.push_back(name_of(n));
        return result;
    }

    // An unsigned integer global attribute of length 1. Missing: kData when required,
    // otherwise `fallback`.
    uint64_t uint_att(const std::string& label, const std::string& att, bool required,
                      uint64_t fallback) const {
        nc_type type;
        size_t len;
        const int status = nc_inq_att(file_.id(), NC_GLOBAL, att.c_str(), &type, &len);
        if (status == NC_ENOTATT) {
            if (!required) return fallback;
            data_error(label, "missing global attribute '" + att + "'" +
                                  (label.empty() ? " (not a DSSTNE dataset file?)" : ""));
        }
        nc_check(status, path_, label + "reading attribute '" + att + "'");
        if (!is_integer_type(type) || len != 1) {
            data_error(label, "attribute '" + att + "' is " + type_name(type) + "[" +
                                  std::to_string(len) + "]; expected one unsigned integer");
        }
        if (type == NC_UINT64) {
            unsigned long long v = 0;
            nc_check(nc_get_att_ulonglong(file_.id(), NC_GLOBAL, att.c_str(), &v), path_,
                     label + "reading attribute '" + att + "'");
            return v;
        }
        long long v = 0;
        nc_check(nc_get_att_longlong(file_.id(), NC_GLOBAL, att.c_str(), &v), path_,
                 label + "reading attribute '" + att + "'");
        if (v < 0) {
            data_error(label, "attribute '" + att + "' is " + std::to_string(v) +
                                  "; expected a non-negative value");
        }
        return static_cast<uint64_t>(v);
    }

    std::string text_att(const std::string& label, const std::string& att) const {
        nc_type type;
        size_t len;
        const int status = nc_inq_att(file_.id(), NC_GLOBAL, att.c_str(), &type, &len);
        if (status == NC_ENOTATT) data_error(label, "missing global attribute '" + att + "'");
        nc_check(status, path_, label + "reading attribute '" + att + "'");
        std::string value;
        if (type == NC_CHAR) {
            value.resize(len);
            if (len > 0) {
                nc_check(nc_get_att_text(file_.id(), NC_GLOBAL, att.c_str(), value.data()), path_,
                         label + "reading attribute '" + att + "'");
            }
        } else if (type == NC_STRING && len == 1) {
            char* s = nullptr;
            nc_check(nc_get_att_string(file_.id(), NC_GLOBAL, att.c_str(), &s), path_,
                     label + "reading attribute '" + att + "'");
            value = s != nullptr ? s : "";
            nc_free_string(1, &s);
        } else {
            data_error(label, "attribute '" + att + "' is " + type_name(type) + "[" +
                                  std::to_string(len) + "]; expected text");
        }
        while (!value.empty() && value.back() == '\0') value.pop_back();
        return value;
    }

    // A 1-D variable: id, type and length. Missing: kData naming it.
    struct Var {
        int id = -1;
        nc_type type = NC_NAT;
        size_t length = 0;
        std::string name;
    };

    bool has_var(const std::string& var) const {
        int id;
        return nc_inq_varid(file_.id(), var.c_str(), &id) == NC_NOERR;
    }

    Var var(const std::string& label, const std::string& name) const {
        Var v;
        v.name = name;
        const int status = nc_inq_varid(file_.id(), name.c_str(), &v.id);
        if (status == NC_ENOTVAR) data_error(label, "missing variable '" + name + "'");
        nc_check(status, path_, label + "looking up variable '" + name + "'");
        int ndims = 0;
        nc_check(nc_inq_var(file_.id(), v.id, nullptr, &v.type, &ndims, nullptr, nullptr), path_,
                 label + "inquiring variable '" + name + "'");
        if (ndims != 1) {
            data_error(label, "variable '" + name + "' has " + std::to_string(ndims) +
                                  " dimensions; expected 1");
        }
        int dimid;
        nc_check(nc_inq_vardimid(file_.id(), v.id, &dimid), path_,
                 label + "inquiring variable '" + name + "'");
        nc_check(nc_inq_dimlen(file_.id(), dimid, &v.length), path_,
                 label + "inquiring variable '" + name + "'");
        return v;
    }

    bool has_dim(const std::string& dim) const {
        int id;
        return nc_inq_dimid(file_.id(), dim.c_str(), &id) == NC_NOERR;
    }

    // Length of a dimension, or `fallback` when the file has no such dimension.
    size_t dim_length(const std::string& label, const std::string& dim, size_t fallback) const {
        int id;
        const int status = nc_inq_dimid(file_.id(), dim.c_str(), &id);
        if (status == NC_EBADDIM) return fallback;
        nc_check(status, path_, label + "looking up dimension '" + dim + "'");
        size_t len = 0;
        nc_check(nc_inq_dimlen(file_.id(), id, &len), path_,
                 label + "inquiring dimension '" + dim + "'");
        return len;
    }

    size_t required_dim(const std::string& label, const std::string& dim) const {
        constexpr size_t kMissing = std::numeric_limits<size_t>::max();
        const size_t len = dim_length(label, dim, kMissing);
        if (len == kMissing) data_error(label, "missing dimension '" + dim + "'");
        return len;
    }

    void check_read(int status, const std::string& label, const Var& v) const {
        nc_check(status, path_,
                 label + "reading variable '" + v.name + "'" +
                     (status == NC_EHDFERR ? " (truncated or corrupt file?)" : ""));
    }

    // Reads a whole integer variable as non-negative 64-bit values.
    std::vector<uint64_t> read_unsigned(const std::string& label, const Var& v) const {
        if (!is_integer_type(v.type)) {
            data_error(label, "variable '" + v.name + "' has type " + type_name(v.type) +
                                  "; expected an integer type (uint or uint64)");
        }
        std::vector<uint64_t> out(v.length);
        if (v.length == 0) return out;
        static_assert(sizeof(unsigned long long) == sizeof(uint64_t));
        if (is_unsigned_type(v.type)) {
            check_read(nc_get_var_ulonglong(file_.id(), v.id,
                                            reinterpret_cast<unsigned long long*>(out.data())),
                       label, v);
        } else {
            auto* signed_data = reinterpret_cast<long long*>(out.data());
            check_read(nc_get_var_longlong(file_.id(), v.id, signed_data), label, v);
            for (size_t i = 0; i < v.length; ++i) {
                if (signed_data[i] < 0) {
                    data_error(label, "variable '" + v.name + "' element " + std::to_string(i) +
                                          " is " + std::to_string(signed_data[i]) +
                                          "; expected a non-negative value");
                }
            }
        }
        return out;
    }

    // Reads sparseIndex: uint directly; other integer types are converted (negative values
    // are an error; values above 2^32-1 become 2^32-1, which the width check then reports).
    std::vector<uint32_t> read_indices(const std::string& label, const Var& v) const {
        if (v.type == NC_UINT) {
            std::vector<uint32_t> out(v.length);
            static_assert(sizeof(unsigned int) == sizeof(uint32_t));
            if (v.length > 0) {
                check_read(nc_get_var_uint(file_.id(), v.id, out.data()), label, v);
            }
            return out;
        }
        const std::vector<uint64_t> wide = read_unsigned(label, v);
        std::vector<uint32_t> out(wide.size());
        for (size_t i = 0; i < wide.size(); ++i) {
            out[i] = static_cast<uint32_t>(
                std::min<uint64_t>(wide[i], std::numeric_limits<uint32_t>::max()));
        }
        return out;
    }

    std::vector<float> read_values(const std::string& label, const Var& v) const {
        if (!is_numeric_type(v.type)) {
            data_error(label, "variable '" + v.name + "' has type " + type_name(v.type) +
                                  "; expected a numeric type");
        }
        std::vector<float> out(v.length);
        if (v.length == 0) return out;
        const int status = nc_get_var_float(file_.id(), v.id, out.data());
        if (status == NC_ERANGE) {
            data_error(label, "variable '" + v.name + "' holds values outside float's range");
        }
        check_read(status, label, v);
        return out;
    }

    // Reads a whole numeric variable as non-negative whole numbers: integer types as
    // read_unsigned, float types when every value is whole (DSSTNE stores dense class indices
    // in the dataset's own type).
    std::vector<uint64_t> read_whole_numbers(const std::string& label, const Var& v) const {
        if (is_integer_type(v.type) || !is_numeric_type(v.type)) return read_unsigned(label, v);
        std::vector<double> raw(v.length);
        if (v.length > 0) check_read(nc_get_var_double(file_.id(), v.id, raw.data()), label, v);
        std::vector<uint64_t> out(v.length);
        for (size_t i = 0; i < v.length; ++i) {
            constexpr double kTwoTo64 = 18446744073709551616.0;
            if (!(raw[i] >= 0.0 && raw[i] < kTwoTo64 && raw[i] == std::floor(raw[i]))) {
                data_error(label, "variable '" + v.name + "' element " + std::to_string(i) +
                                      " is " + std::to_string(raw[i]) +
                                      "; expected a non-negative whole number");
            }
            out[i] = static_cast<uint64_t>(raw[i]);
        }
        return out;
    }

    Dataset read_dataset(size_t n) const;

  private:
    void read_sparse(size_t n, const std::string& label, uint64_t attributes, Dataset& d) const;
    void read_dense(size_t n, const std::string& label, uint64_t attributes, Dataset& d) const;
    void read_example_rows(size_t n, const std::string& label, Dataset& d) const;
    void read_weights(size_t n, const std::string& label, Dataset& d) const;

    std::string path_;
    NcFile file_;
};

// Sorts each row's indices (stably with values) and reports the first row, in row order, that
// holds an index >= cols or a duplicate column.
void sort_and_check_rows(const Reader& reader, const std::string& label, Dataset& d) {
    const int64_t rows = static_cast<int64_t>(d.rows);
    int64_t first_bad = rows;
    const bool has_values = !d.values.empty();
#pragma omp parallel for schedule(dynamic, 512) reduction(min : first_bad)
    for (int64_t r = 0; r < rows; ++r) {
        uint32_t* idx = d.indices.data() + d.offsets[r];
        const uint64_t len = d.offsets[r + 1] - d.offsets[r];
        bool sorted = true;
        bool bad = false;
        for (uint64_t k = 0; k < len; ++k) {
            if (idx[k] >= d.cols) bad = true;
            if (k > 0 && idx[k] <= idx[k - 1]) sorted = false;
        }
        if (bad) {
            first_bad = std::min(first_bad, r);
            continue;
        }
        if (sorted) continue;
        if (has_values) {
            float* val = d.values.data() + d.offsets[r];
            std::vector<std::pair<uint32_t, float>> pairs(len);
            for (uint64_t k = 0; k < len; ++k) pairs[k] = {idx[k], val[k]};
            std::stable_sort(pairs.begin(), pairs.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
            for (uint64_t k = 0; k < len; ++k) {
                idx[k] = pairs[k].first;
                val[k] = pairs[k].second;
            }
        } else {
            std::sort(idx, idx + len);
        }
        for (uint64_t k = 1; k < len; ++k) {
            if (idx[k] == idx[k - 1]) {
                first_bad = std::min(first_bad, r);
                break;
            }
        }
    }
    if (first_bad == rows) return;
    const uint64_t r = static_cast<uint64_t>(first_bad);
    const std::string row = "row " + std::to_string(r) + ": ";
    for (uint64_t k = d.offsets[r]; k < d.offsets[r + 1]; ++k) {
        if (d.indices[k] >= d.cols) {
            reader.data_error(label, row + "column index " + std::to_string(d.indices[k]) +
                                         " >= width " + std::to_string(d.cols));
        }
    }
    for (uint64_t k = d.offsets[r] + 1; k < d.offsets[r + 1]; ++k) {
        if (d.indices[k] == d.indices[k - 1]) {
            reader.data_error(label, row + "duplicate column " + std::to_string(d.indices[k]));
        }
    }
    reader.data_error(label, row + "invalid row");  // not reached
}

Dataset Reader::read_dataset(size_t n) const {
    Dataset d;
    d.name = name_of(n);
    const std::string label = "dataset " + d.name + ": ";
    const uint64_t attributes = uint_att(label, indexed("attributes", n), true, 0);

    // cols = width (x height x length for 2-D/3-D examples, flattened as DSSTNE does).
    const uint64_t dims = uint_att(label, indexed("dimensions", n), false, 1);
    if (dims < 1 || dims > 3) {
        data_error(label, "attribute 'dimensions" + std::to_string(n) + "' is " +
                              std::to_string(dims) + "; expected 1, 2 or 3");
    }
    uint64_t cols = uint_att(label, indexed("width", n), true, 0);
    if (dims > 1) cols *= uint_att(label, indexed("height", n), true, 0);
    if (dims > 2) cols *= uint_att(label, indexed("length", n), true, 0);
    if (cols > std::numeric_limits<uint32_t>::max()) {
        data_error(label, "example size " + std::to_string(cols) + " exceeds 2^32-1 columns");
    }
    d.cols = static_cast<uint32_t>(cols);

    if ((attributes & kAttrSparse) != 0) {
        read_sparse(n, label, attributes, d);
        // SparseIgnoreZero concerns sparse targets only; DSSTNE ignores it on dense data.
        d.sparse_ignore_zero = (attributes & kAttrSparseIgnoreZero) != 0;
    } else {
        read_dense(n, label, attributes, d);
    }
    if ((attributes & kAttrIndexed) != 0) read_example_rows(n, label, d);
    if ((attributes & kAttrWeighted) != 0) read_weights(n, label, d);
    return d;
}

// The stored rows of a sparse dataset: sparseStart/sparseEnd have one entry per stored row
// (per example, or per unique example when Indexed).
void Reader::read_sparse(size_t n, const std::string& label, uint64_t attributes,
                         Dataset& d) const {
    const Var start_var = var(label, indexed("sparseStart", n));
    const Var end_var = var(label, indexed("sparseEnd", n));
    const Var index_var = var(label, indexed("sparseIndex", n));
    if (start_var.length != end_var.length) {
        data_error(label, "sparseStart" + std::to_string(n) + " has " +
                              std::to_string(start_var.length) + " entries but sparseEnd" +
                              std::to_string(n) + " has " + std::to_string(end_var.length) +
                              "; expected one of each per stored row");
    }
    const std::string rows_dim =
        indexed((attributes & kAttrIndexed) != 0 ? "uniqueExamplesDim" : "examplesDim", n);
    const size_t rows = dim_length(label, rows_dim, start_var.length);
    if (rows != start_var.length) {
        data_error(label, "sparseStart" + std::to_string(n) + " has " +
                              std::to_string(start_var.length) + " entries; expected " + rows_dim +
                              " = " + std::to_string(rows));
    }
    d.rows = rows;

    const bool boolean = (attributes & kAttrBoolean) != 0 || !has_var(indexed("sparseData", n));
    const std::vector<uint64_t> starts = read_unsigned(label, start_var);
    const std::vector<uint64_t> ends = read_unsigned(label, end_var);
    const uint64_t stored = index_var.length;
    for (uint64_t r = 0; r < d.rows; ++r) {
        if (ends[r] < starts[r]) {
            data_error(label, "row " + std::to_string(r) + ": sparseEnd " +
                                  std::to_string(ends[r]) + " < sparseStart " +
                                  std::to_string(starts[r]));
        }
        if (ends[r] > stored) {
            data_error(label, "row " + std::to_string(r) + ": sparseEnd " +
                                  std::to_string(ends[r]) + " is beyond the " +
                                  std::to_string(stored) + " stored nonzeros (sparseIndex" +
                                  std::to_string(n) + ")");
        }
    }

    std::vector<uint32_t> raw_indices = read_indices(label, index_var);
    std::vector<float> raw_values;
    if (!boolean) {
        const Var data_var = var(label, indexed("sparseData", n));
        if (data_var.length != stored) {
            data_error(label, "sparseData" + std::to_string(n) + " has " +
                                  std::to_string(data_var.length) + " entries; expected " +
                                  std::to_string(stored) + " (one per sparseIndex entry)");
        }
        raw_values = read_values(label, data_var);
    }

    // Rows stored back to back from 0 are already CSR; otherwise compact them in row order.
    bool contiguous = d.rows == 0 || starts[0] == 0;
    for (uint64_t r = 1; contiguous && r < d.rows; ++r) contiguous = starts[r] == ends[r - 1];
    d.offsets.assign(d.rows + 1, 0);
    if (contiguous) {
        const uint64_t used = d.rows == 0 ? 0 : ends.back();
        for (uint64_t r = 0; r < d.rows; ++r) d.offsets[r + 1] = ends[r];
        raw_indices.resize(used);
        if (!boolean) raw_values.resize(used);
        d.indices = std::move(raw_indices);
        d.values = std::move(raw_values);
    } else {
        for (uint64_t r = 0; r < d.rows; ++r) {
            d.offsets[r + 1] = d.offsets[r] + (ends[r] - starts[r]);
        }
        d.indices.resize(d.offsets.back());
        if (!boolean) d.values.resize(d.offsets.back());
        const int64_t rows = static_cast<int64_t>(d.rows);
#pragma omp parallel for schedule(dynamic, 1024)
        for (int64_t r = 0; r < rows; ++r) {
            std::copy(raw_indices.begin() + starts[r], raw_indices.begin() + ends[r],
                      d.indices.begin() + d.offsets[r]);
            if (!boolean) {
                std::copy(raw_values.begin() + starts[r], raw_values.begin() + ends[r],
                          d.values.begin() + d.offsets[r]);
            }
        }
    }
    sort_and_check_rows(*this, label, d);
}

// Dense data<n>: stored rows x width values, row-major, or with the Boolean attribute one class
// index per stored row (DSSTNE expands it to one-hot). Kept as CSR of the nonzero entries.
void Reader::read_dense(size_t n, const std::string& label, uint64_t attributes, Dataset& d) const {
    // DSSTNE: unique examples from uniqueExamplesDim when present, else examplesDim.
    const std::string examples_dim = indexed("examplesDim", n);
    const std::string unique_dim = indexed("uniqueExamplesDim", n);
    const bool use_unique = (attributes & kAttrIndexed) != 0 && has_dim(unique_dim);
    const std::string rows_dim = use_unique ? unique_dim : examples_dim;
    const uint64_t rows = required_dim(label, rows_dim);
    const Var data_var = var(label, indexed("data", n));
    const std::string data_name = "data" + std::to_string(n);
    d.dense = true;
    d.rows = rows;
    d.offsets.assign(1, 0);

    if ((attributes & kAttrBoolean) != 0) {
        if (data_var.length != rows) {
            data_error(label, "variable '" + data_name + "' has " +
                                  std::to_string(data_var.length) +
                                  " entries; expected one class index per row, " + rows_dim +
                                  " = " + std::to_string(rows));
        }
        const std::vector<uint64_t> classes = read_whole_numbers(label, data_var);
        d.indices.resize(rows);
        for (uint64_t r = 0; r < rows; ++r) {
            if (classes[r] >= d.cols) {
                data_error(label, "row " + std::to_string(r) + ": class index " +
                                      std::to_string(classes[r]) + " in '" + data_name +
                                      "' >= width " + std::to_string(d.cols));
            }
            d.indices[r] = static_cast<uint32_t>(classes[r]);
            d.offsets.push_back(r + 1);
        }
        return;
    }

    if (d.cols > 0 && rows > std::numeric_limits<uint64_t>::max() / d.cols) {
        data_error(label, rows_dim + " = " + std::to_string(rows) + " rows x width " +
                              std::to_string(d.cols) + " overflows");
    }
    if (data_var.length != rows * d.cols) {
        data_error(label, "variable '" + data_name + "' has " + std::to_string(data_var.length) +
                              " entries; expected rows x width = " + std::to_string(rows) + " x " +
                              std::to_string(d.cols) + " = " + std::to_string(rows * d.cols) +
                              " (" + rows_dim + " x width" + std::to_string(n) + ")");
    }
    const std::vector<float> dense = read_values(label, data_var);
    d.offsets.reserve(rows + 1);
    for (uint64_t r = 0; r < rows; ++r) {
        const float* row = dense.data() + r * d.cols;
        for (uint32_t c = 0; c < d.cols; ++c) {
            if (row[c] != 0.0f) {
                d.indices.push_back(c);
                d.values.push_back(row[c]);
            }
        }
        d.offsets.push_back(d.indices.size());
    }
}

// index<n>: one stored row per example.
void Reader::read_example_rows(size_t n, const std::string& label, Dataset& d) const {
    const Var index_var = var(label, indexed("index", n));
    const std::string examples_dim = indexed("examplesDim", n);
    const size_t examples = dim_length(label, examples_dim, index_var.length);
    if (index_var.length != examples) {
        data_error(label, "variable '" + index_var.name + "' has " +
                              std::to_string(index_var.length) + " entries; expected " +
                              examples_dim + " = " + std::to_string(examples) +
                              " (one per example)");
    }
    const std::vector<uint64_t> rows = read_unsigned(label, index_var);
    for (size_t e = 0; e < rows.size(); ++e) {
        if (rows[e] >= d.rows) {
            data_error(label, "example " + std::to_string(e) + ": variable '" + index_var.name +
                                  "' holds row " + std::to_string(rows[e]) +
                                  "; expected a stored row < " + std::to_string(d.rows) +
                                  " (unique examples)");
        }
        if (rows[e] > std::numeric_limits<uint32_t>::max()) {
            data_error(label, "example " + std::to_string(e) + ": variable '" + index_var.name +
                                  "' holds row " + std::to_string(rows[e]) +
                                  "; indexed datasets are limited to 2^32 stored rows");
        }
    }
    d.example_rows.assign(rows.begin(), rows.end());
    if (d.example_rows.empty()) {
        // No examples: nothing refers to the stored rows, and an empty example_rows means
        // "not indexed", so keep an empty dataset.
        d.rows = 0;
        d.offsets.assign(1, 0);
        d.indices.clear();
        d.values.clear();
    }
}

// dataWeight<n>: one finite float per example.
void Reader::read_weights(size_t n, const std::string& label, Dataset& d) const {
    const Var weight_var = var(label, indexed("dataWeight", n));
    if (weight_var.length != d.examples()) {
        data_error(label, "variable '" + weight_var.name + "' has " +
                              std::to_string(weight_var.length) + " entries; expected " +
                              std::to_string(d.examples()) + " (one weight per example)");
    }
    d.weights = read_values(label, weight_var);
    for (size_t e = 0; e < d.weights.size(); ++e) {
        if (!std::isfinite(d.weights[e])) {
            data_error(label, "example " + std::to_string(e) + ": variable '" + weight_var.name +
                                  "' holds " + std::to_string(d.weights[e]) +
                                  "; expected a finite weight");
        }
    }
}

// Removes a temporary file on scope exit unless committed.
class TempFile {
  public:
    explicit TempFile(std::string path) : path_(std::move(path)) {}
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    ~TempFile() {
        if (!committed_) std::remove(path_.c_str());
    }
    const std::string& path() const { return path_; }
    void commit() { committed_ = true; }

  private:
    std::string path_;
    bool committed_ = false;
};

void put_uint_att(int nc, const std::string& path, const std::string& att, uint32_t value) {
    nc_check(nc_put_att_uint(nc, NC_GLOBAL, att.c_str(), NC_UINT, 1, &value), path,
             "writing attribute '" + att + "'");
}

// A length of 0 defines an unlimited dimension (NC_UNLIMITED == 0), which is how netCDF
// represents an empty dimension; its current length reads back as 0.
int define_dim(int nc, const std::string& path, const std::string& name, size_t length) {
    int id;
    nc_check(nc_def_dim(nc, name.c_str(), length, &id), path, "defining dimension '" + name + "'");
    return id;
}

// A dense boolean dataset with exactly one entry per row is categorical: written as one class
// index per row with the Boolean attribute, as DSSTNE stores one-hot data.
bool is_categorical(const Dataset& d) {
    if (!d.dense || !d.is_boolean()) return false;
    for (uint64_t r = 0; r < d.rows; ++r) {
        if (d.row_length(r) != 1) return false;
    }
    return true;
}

// The row-major [rows, cols] array of a dense dataset (boolean entries are 1.0).
std::vector<float> dense_values(const Dataset& d) {
    std::vector<float> out(d.rows * d.cols, 0.0f);
    for (uint64_t r = 0; r < d.rows; ++r) {
        for (uint64_t k = d.offsets[r]; k < d.offsets[r + 1]; ++k) {
            out[r * d.cols + d.indices[k]] = d.is_boolean() ? 1.0f : d.values[k];
        }
    }
    return out;
}

// Defines a 1-D variable with deflate 1 + shuffle and chunks of about 1 M elements.
int define_var(int nc, const std::string& path, const std::string& name, nc_type type, int dim,
               size_t length) {
    int id;
    nc_check(nc_def_var(nc, name.c_str(), type, 1, &dim, &id), path,
             "defining variable '" + name + "'");
    if (length > 0) {  // a 0-length dimension is unlimited: keep netCDF's default chunking
        const size_t chunk = std::min(length, kChunkElements);
        nc_check(nc_def_var_chunking(nc, id, NC_CHUNKED, &chunk), path,
                 "setting chunking of '" + name + "'");
        nc_check(nc_def_var_deflate(nc, id, /*shuffle=*/1, /*deflate=*/1, /*level=*/1), path,
                 "setting compression of '" + name + "'");
    }
    return id;
}

}  // namespace

Dataset Dataset::read(const std::string& path, const std::string& name) {
    Reader reader(path);
    const std::vector<std::string> names = reader.names();
    if (names.empty()) {
        throw Error(ErrorCategory::kData, path + ": the file holds no datasets");
    }
    if (name.empty()) return reader.read_dataset(0);
    for (size_t n = 0; n < names.size(); ++n) {
        if (names[n] == name) return reader.read_dataset(n);
    }
    std::string present;
    for (const std::string& s : names) present += (present.empty() ? "" : ", ") + s;
    throw Error(ErrorCategory::kData,
                path + ": no dataset named '" + name + "'; datasets present: " + present);
}

std::vector<Dataset> read_datasets(const std::string& path) {
    Reader reader(path);
    const size_t count = reader.dataset_count();
    std::vector<Dataset> result;
    result.reserve(count);
    for (size_t n = 0; n < count; ++n) result.push_back(reader.read_dataset(n));
    return result;
}

std::vector<std::string> list_datasets(const std::string& path) {
    return Reader(path).names();
}

void write_datasets(const std::string& path, const std::vector<Dataset>& datasets) {
    std::set<std::string> seen;
    for (const Dataset& d : datasets) {
        d.validate(path);
        if (d.dense && d.cols > 0 && d.rows > std::numeric_limits<size_t>::max() / d.cols) {
            throw Error(ErrorCategory::kData,
                        path + ": dataset " + d.name + ": " + std::to_string(d.rows) + " rows x " +
                            std::to_string(d.cols) + " columns is too large to write densely");
        }
        if (!seen.insert(d.name).second) {
            throw Error(ErrorCategory::kData,
                        path + ": dataset " + d.name + ": duplicate dataset name in one file");
        }
    }

    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
        throw Error(ErrorCategory::kIo,
                    path + ": cannot write: directory " + parent.string() + " does not exist");
    }
    TempFile temp(path + ".tmp." + std::to_string(static_cast<long>(getpid())));
    {
        NcFile file;  // closed before `temp` is removed on failure
        nc_check(nc_create(temp.path().c_str(), NC_NETCDF4 | NC_CLOBBER, file.out()), path,
                 "cannot create " + temp.path());
        const int nc = file.id();
        int old_fill;
        nc_check(nc_set_fill(nc, NC_NOFILL, &old_fill), path, "setting fill mode");

        put_uint_att(nc, path, "datasets", static_cast<uint32_t>(datasets.size()));
        struct Ids {
            int start = -1, end = -1, index = -1, data = -1;  // sparse variables
            int dense = -1, example_rows = -1, weights = -1;
        };
        std::vector<Ids> ids(datasets.size());
        for (size_t n = 0; n < datasets.size(); ++n) {
            const Dataset& d = datasets[n];
            const bool categorical = is_categorical(d);
            const bool boolean = d.dense ? categorical : d.is_boolean();
            const std::string att = indexed("name", n);
            nc_check(nc_put_att_text(nc, NC_GLOBAL, att.c_str(), d.name.size(), d.name.c_str()),
                     path, "writing attribute '" + att + "'");
            const uint64_t attributes = (d.dense ? 0 : kAttrSparse) | (boolean ? kAttrBoolean : 0) |
                                        (d.is_indexed() ? kAttrIndexed : 0) |
                                        (d.is_weighted() ? kAttrWeighted : 0) |
                                        (d.sparse_ignore_zero ? kAttrSparseIgnoreZero : 0);
            put_uint_att(nc, path, indexed("attributes", n), static_cast<uint32_t>(attributes));
            put_uint_att(nc, path, indexed("kind", n), 0);
            put_uint_att(nc, path, indexed("dataType", n), boolean ? kTypeUInt : kTypeFloat);
            put_uint_att(nc, path, indexed("dimensions", n), 1);
            put_uint_att(nc, path, indexed("width", n), d.cols);

            // Stored rows live on uniqueExamplesDim when indexed, else on examplesDim.
            const int examples_dim = define_dim(nc, path, indexed("examplesDim", n), d.examples());
            const int rows_dim = d.is_indexed()
                                     ? define_dim(nc, path, indexed("uniqueExamplesDim", n), d.rows)
                                     : examples_dim;
            if (d.dense) {
                const size_t length = categorical ? d.rows : d.rows * d.cols;
                const int data_dim = define_dim(nc, path, indexed("dataDim", n), length);
                ids[n].dense = define_var(nc, path, indexed("data", n),
                                          categorical ? NC_UINT : NC_FLOAT, data_dim, length);
            } else {
                const int data_dim = define_dim(nc, path, indexed("sparseDataDim", n), d.nnz());
                ids[n].start =
                    define_var(nc, path, indexed("sparseStart", n), NC_UINT64, rows_dim, d.rows);
                ids[n].end =
                    define_var(nc, path, indexed("sparseEnd", n), NC_UINT64, rows_dim, d.rows);
                ids[n].index =
                    define_var(nc, path, indexed("sparseIndex", n), NC_UINT, data_dim, d.nnz());
                if (!d.is_boolean()) {
                    ids[n].data =
                        define_var(nc, path, indexed("sparseData", n), NC_FLOAT, data_dim, d.nnz());
                }
            }
            if (d.is_indexed()) {
                ids[n].example_rows =
                    define_var(nc, path, indexed("index", n), NC_UINT, examples_dim, d.examples());
            }
            if (d.is_weighted()) {
                ids[n].weights = define_var(nc, path, indexed("dataWeight", n), NC_FLOAT,
                                            examples_dim, d.examples());
            }
        }
        nc_check(nc_enddef(nc), path, "ending define mode");

        for (size_t n = 0; n < datasets.size(); ++n) {
            const Dataset& d = datasets[n];
            const std::string suffix = std::to_string(n) + "'";
            if (d.dense && is_categorical(d)) {
                if (d.rows > 0) {
                    nc_check(nc_put_var_uint(nc, ids[n].dense, d.indices.data()), path,
                             "writing variable 'data" + suffix);
                }
            } else if (d.dense) {
                const std::vector<float> values = dense_values(d);
                if (!values.empty()) {
                    nc_check(nc_put_var_float(nc, ids[n].dense, values.data()), path,
                             "writing variable 'data" + suffix);
                }
            } else {
                if (d.rows > 0) {
                    const auto* offsets =
                        reinterpret_cast<const unsigned long long*>(d.offsets.data());
                    nc_check(nc_put_var_ulonglong(nc, ids[n].start, offsets), path,
                             "writing variable 'sparseStart" + suffix);
                    nc_check(nc_put_var_ulonglong(nc, ids[n].end, offsets + 1), path,
                             "writing variable 'sparseEnd" + suffix);
                }
                if (d.nnz() > 0) {
                    nc_check(nc_put_var_uint(nc, ids[n].index, d.indices.data()), path,
                             "writing variable 'sparseIndex" + suffix);
                    if (!d.is_boolean()) {
                        nc_check(nc_put_var_float(nc, ids[n].data, d.values.data()), path,
                                 "writing variable 'sparseData" + suffix);
                    }
                }
            }
            if (d.is_indexed()) {
                nc_check(nc_put_var_uint(nc, ids[n].example_rows, d.example_rows.data()), path,
                         "writing variable 'index" + suffix);
            }
            if (d.is_weighted()) {
                nc_check(nc_put_var_float(nc, ids[n].weights, d.weights.data()), path,
                         "writing variable 'dataWeight" + suffix);
            }
        }
        nc_check(file.close(), path, "closing " + temp.path());
    }
    if (std::rename(temp.path().c_str(), path.c_str()) != 0) {
        throw Error(ErrorCategory::kIo,
                    path + ": cannot rename " + temp.path() + " to it: " + std::strerror(errno));
    }
    temp.commit();
}

}  // namespace sparsenet
