// Reading and writing DSSTNE-layout netCDF dataset files (see docs/data-format.md).
#include <netcdf.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/resources.h"
#include "io/dataset_read.h"
#include "io/names_variable.h"
#include "io/netcdf_chunks.h"
#include "io/netcdf_header_check.h"
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

// One open dataset file being read. `label` names the dataset in messages.
class Reader {
  public:
    explicit Reader(const std::string& path) : path_(path) {
        io::check_netcdf_header(path);
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
        std::vector<std::string> result;  // not reserved: `count` is the file's word alone
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
            data_error(label, "attribute '" + att + "' is " + io::nc_type_name(type) + "[" +
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
            data_error(label, "attribute '" + att + "' is " + io::nc_type_name(type) + "[" +
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

    void require_integer(const std::string& label, const Var& v) const {
        if (!is_integer_type(v.type)) {
            data_error(label, "variable '" + v.name + "' has type " + io::nc_type_name(v.type) +
                                  "; expected an integer type (uint or uint64)");
        }
    }

    void require_numeric(const std::string& label, const Var& v) const {
        if (!is_numeric_type(v.type)) {
            data_error(label, "variable '" + v.name + "' has type " + io::nc_type_name(v.type) +
                                  "; expected a numeric type");
        }
    }

    // Elements [start, start + count) of an integer variable (require_integer) as non-negative
    // 64-bit values; a negative one is an error naming its element.
    void read_unsigned(const std::string& label, const Var& v, size_t start, size_t count,
                       uint64_t* out) const {
        if (count == 0) return;
        static_assert(sizeof(unsigned long long) == sizeof(uint64_t));
        if (is_unsigned_type(v.type)) {
            check_read(nc_get_vara_ulonglong(file_.id(), v.id, &start, &count,
                                             reinterpret_cast<unsigned long long*>(out)),
                       label, v);
            return;
        }
        auto* signed_data = reinterpret_cast<long long*>(out);
        check_read(nc_get_vara_longlong(file_.id(), v.id, &start, &count, signed_data), label, v);
        for (size_t i = 0; i < count; ++i) {
            if (signed_data[i] < 0) {
                data_error(label, "variable '" + v.name + "' element " + std::to_string(start + i) +
                                      " is " + std::to_string(signed_data[i]) +
                                      "; expected a non-negative value");
            }
        }
    }

    std::vector<uint64_t> read_unsigned(const std::string& label, const Var& v) const {
        std::vector<uint64_t> out(v.length);
        read_unsigned(label, v, 0, v.length, out.data());
        return out;
    }

    // Elements of sparseIndex: uint directly; other integer types through `wide` (negative values
    // are an error; values above 2^32-1 become 2^32-1, which the width check then reports).
    void read_indices(const std::string& label, const Var& v, size_t start, size_t count,
                      uint32_t* out, std::vector<uint64_t>& wide) const {
        if (count == 0) return;
        if (v.type == NC_UINT) {
            static_assert(sizeof(unsigned int) == sizeof(uint32_t));
            check_read(nc_get_vara_uint(file_.id(), v.id, &start, &count, out), label, v);
            return;
        }
        wide.resize(count);
        read_unsigned(label, v, start, count, wide.data());
        for (size_t i = 0; i < count; ++i) {
            out[i] = static_cast<uint32_t>(
                std::min<uint64_t>(wide[i], std::numeric_limits<uint32_t>::max()));
        }
    }

    // Elements [start, start + count) of a numeric variable (require_numeric) as floats.
    void read_values(const std::string& label, const Var& v, size_t start, size_t count,
                     float* out) const {
        if (count == 0) return;
        const int status = nc_get_vara_float(file_.id(), v.id, &start, &count, out);
        if (status == NC_ERANGE) {
            data_error(label, "variable '" + v.name + "' holds values outside float's range");
        }
        check_read(status, label, v);
    }

    std::vector<float> read_values(const std::string& label, const Var& v) const {
        std::vector<float> out(v.length);
        read_values(label, v, 0, v.length, out.data());
        return out;
    }

    // Elements of a numeric variable as non-negative whole numbers: integer types as
    // read_unsigned, float types (through `raw`) when every value is whole (DSSTNE stores dense
    // class indices in the dataset's own type).
    void read_whole_numbers(const std::string& label, const Var& v, size_t start, size_t count,
                            uint64_t* out, std::vector<double>& raw) const {
        if (is_integer_type(v.type)) return read_unsigned(label, v, start, count, out);
        if (count == 0) return;
        raw.resize(count);
        check_read(nc_get_vara_double(file_.id(), v.id, &start, &count, raw.data()), label, v);
        for (size_t i = 0; i < count; ++i) {
            constexpr double kTwoTo64 = 18446744073709551616.0;
            if (!(raw[i] >= 0.0 && raw[i] < kTwoTo64 && raw[i] == std::floor(raw[i]))) {
                data_error(label, "variable '" + v.name + "' element " + std::to_string(start + i) +
                                      " is " + std::to_string(raw[i]) +
                                      "; expected a non-negative whole number");
            }
            out[i] = static_cast<uint64_t>(raw[i]);
        }
    }

    // What the attributes, dimensions and variables of dataset n say, every shape, length and
    // type checked, before any data is read (inspect).
    struct Layout {
        std::string name;
        std::string label;  // "dataset <name>: ", the prefix of every message
        uint64_t attributes = 0;
        uint32_t cols = 0;
        uint64_t rows = 0;      // stored rows in the file
        uint64_t examples = 0;  // entries of index<n> when indexed, else rows
        bool sparse = false;
        bool categorical = false;  // dense with the Boolean bit: one class index per row
        bool boolean = false;      // no values in memory
        bool indexed = false;
        bool weighted = false;
        Var start, end, index, values;  // sparse; `values` only when not boolean
        Var data;                       // dense
        Var example_rows, weights;      // index<n>, dataWeight<n>
    };

    // The band of columns kept, [first, last) with last <= cols.
    struct Band {
        uint32_t first = 0;
        uint32_t last = 0;
    };

    size_t find(const std::string& name) const;
    Layout inspect(size_t n) const;
    Dataset read_dataset(size_t n, uint32_t first_col, uint32_t last_col, uint64_t chunk) const;

  private:
    struct SparseBuffers;
    void inspect_sparse(size_t n, Layout& layout) const;
    void inspect_dense(size_t n, Layout& layout) const;
    void read_sparse(const Layout& layout, Band band, uint64_t chunk, Dataset& d) const;
    void preload_whole(const Layout& layout, Dataset& d, SparseBuffers& buf) const;
    void read_rows(const Layout& layout, Band band, uint64_t first_row, uint64_t count,
                   const uint64_t* starts, const uint64_t* ends, SparseBuffers& buf,
                   Dataset& d) const;
    void fetch_rows(const Layout& layout, bool may_load_all, uint64_t count, const uint64_t* starts,
                    const uint64_t* ends, SparseBuffers& buf, uint32_t* indices,
                    float* values) const;
    void read_entries(const Layout& layout, uint64_t start, uint64_t count, uint32_t* indices,
                      float* values, std::vector<uint64_t>& wide) const;
    void read_dense(const Layout& layout, Band band, uint64_t chunk, Dataset& d) const;
    void read_classes(const Layout& layout, Band band, uint64_t chunk, Dataset& d) const;
    void read_example_rows(const Layout& layout, Dataset& d) const;
    void read_weights(const Layout& layout, Dataset& d) const;

    std::string path_;
    NcFile file_;
};

// Sorts each of `count` rows (stored rows first_row, first_row + 1, ...; row i holds
// indices[local[i] .. local[i+1])) by column, stably with values when there are any, and reports
// the first row, in row order, that holds an index >= cols or a duplicate column.
void sort_and_check_rows(const Reader& reader, const std::string& label, uint32_t cols,
                         uint64_t first_row, uint64_t count, const uint64_t* local,
                         uint32_t* indices, float* values) {
    // One pass in row order up to the first row with an index >= cols or two equal neighbours;
    // rows out of order are noted and sorted after it. Serial: a chunk is small, the read is
    // bound by decompression, and a parallel region per chunk made reads slower (10-40 % with 2
    // threads on a loaded 2-core machine, where every barrier waits for a descheduled thread).
    const int64_t rows = static_cast<int64_t>(count);
    int64_t first_bad = rows;
    std::vector<int64_t> unsorted;
    for (int64_t r = 0; r < rows && first_bad == rows; ++r) {
        const uint32_t* idx = indices + local[r];
        const uint64_t len = local[r + 1] - local[r];
        bool sorted = true;
        bool bad = len > 0 && idx[0] >= cols;
        for (uint64_t k = 1; k < len; ++k) {
            bad |= idx[k] >= cols || idx[k] == idx[k - 1];
            sorted &= idx[k] > idx[k - 1];
        }
        if (bad) {
            first_bad = r;
        } else if (!sorted) {
            unsorted.push_back(r);
        }
    }
    std::vector<std::pair<uint32_t, float>> pairs;
    for (const int64_t r : unsorted) {  // in row order: the first duplicate found is the first
        uint32_t* idx = indices + local[r];
        const uint64_t len = local[r + 1] - local[r];
        if (values != nullptr) {
            float* val = values + local[r];
            pairs.resize(len);
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
        if (std::adjacent_find(idx, idx + len) != idx + len) {
            first_bad = r;
            break;
        }
    }
    if (first_bad == rows) return;
    const uint64_t r = static_cast<uint64_t>(first_bad);
    const std::string row = "row " + std::to_string(first_row + r) + ": ";
    for (uint64_t k = local[r]; k < local[r + 1]; ++k) {
        if (indices[k] >= cols) {
            reader.data_error(label, row + "column index " + std::to_string(indices[k]) +
                                         " >= width " + std::to_string(cols));
        }
    }
    for (uint64_t k = local[r] + 1; k < local[r + 1]; ++k) {
        if (indices[k] == indices[k - 1]) {
            reader.data_error(label, row + "duplicate column " + std::to_string(indices[k]));
        }
    }
    reader.data_error(label, row + "invalid row");  // not reached
}

// The dataset called `name`, or the first one when `name` is empty.
size_t Reader::find(const std::string& name) const {
    const std::vector<std::string> all = names();
    if (all.empty()) {
        throw Error(ErrorCategory::kData, path_ + ": the file holds no datasets");
    }
    if (name.empty()) return 0;
    for (size_t n = 0; n < all.size(); ++n) {
        if (all[n] == name) return n;
    }
    std::string present;
    for (const std::string& s : all) present += (present.empty() ? "" : ", ") + s;
    throw Error(ErrorCategory::kData,
                path_ + ": no dataset named '" + name + "'; datasets present: " + present);
}

Reader::Layout Reader::inspect(size_t n) const {
    Layout layout;
    layout.name = name_of(n);
    layout.label = "dataset " + layout.name + ": ";
    const std::string& label = layout.label;
    const uint64_t attributes = uint_att(label, indexed("attributes", n), true, 0);
    layout.attributes = attributes;

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
    layout.cols = static_cast<uint32_t>(cols);
    layout.sparse = (attributes & kAttrSparse) != 0;
    layout.indexed = (attributes & kAttrIndexed) != 0;
    layout.weighted = (attributes & kAttrWeighted) != 0;
    if (layout.sparse) {
        inspect_sparse(n, layout);
    } else {
        inspect_dense(n, layout);
    }

    // index<n>: one stored row per example.
    layout.examples = layout.rows;
    if (layout.indexed) {
        const Var index_var = var(label, indexed("index", n));
        const std::string examples_dim = indexed("examplesDim", n);
        const size_t examples = dim_length(label, examples_dim, index_var.length);
        if (index_var.length != examples) {
            data_error(label, "variable '" + index_var.name + "' has " +
                                  std::to_string(index_var.length) + " entries; expected " +
                                  examples_dim + " = " + std::to_string(examples) +
                                  " (one per example)");
        }
        require_integer(label, index_var);
        layout.example_rows = index_var;
        layout.examples = index_var.length;
    }
    // dataWeight<n>: one float per example.
    if (layout.weighted) {
        const Var weight_var = var(label, indexed("dataWeight", n));
        if (weight_var.length != layout.examples) {
            data_error(label, "variable '" + weight_var.name + "' has " +
                                  std::to_string(weight_var.length) + " entries; expected " +
                                  std::to_string(layout.examples) + " (one weight per example)");
        }
        require_numeric(label, weight_var);
        layout.weights = weight_var;
    }
    return layout;
}

// Sparse: sparseStart/sparseEnd have one entry per stored row (per example, or per unique
// example when Indexed).
void Reader::inspect_sparse(size_t n, Layout& layout) const {
    const std::string& label = layout.label;
    const Var start_var = var(label, indexed("sparseStart", n));
    const Var end_var = var(label, indexed("sparseEnd", n));
    const Var index_var = var(label, indexed("sparseIndex", n));
    if (start_var.length != end_var.length) {
        data_error(label, "sparseStart" + std::to_string(n) + " has " +
                              std::to_string(start_var.length) + " entries but sparseEnd" +
                              std::to_string(n) + " has " + std::to_string(end_var.length) +
                              "; expected one of each per stored row");
    }
    const std::string rows_dim = indexed(layout.indexed ? "uniqueExamplesDim" : "examplesDim", n);
    const size_t rows = dim_length(label, rows_dim, start_var.length);
    if (rows != start_var.length) {
        data_error(label, "sparseStart" + std::to_string(n) + " has " +
                              std::to_string(start_var.length) + " entries; expected " + rows_dim +
                              " = " + std::to_string(rows));
    }
    layout.rows = rows;
    require_integer(label, start_var);
    require_integer(label, end_var);
    require_integer(label, index_var);
    layout.start = start_var;
    layout.end = end_var;
    layout.index = index_var;

    layout.boolean = (layout.attributes & kAttrBoolean) != 0 || !has_var(indexed("sparseData", n));
    if (!layout.boolean) {
        const Var data_var = var(label, indexed("sparseData", n));
        if (data_var.length != index_var.length) {
            data_error(label, "sparseData" + std::to_string(n) + " has " +
                                  std::to_string(data_var.length) + " entries; expected " +
                                  std::to_string(index_var.length) +
                                  " (one per sparseIndex entry)");
        }
        require_numeric(label, data_var);
        layout.values = data_var;
    }
}

// Dense data<n>: stored rows x width values, row-major, or with the Boolean attribute one class
// index per stored row (DSSTNE expands it to one-hot).
void Reader::inspect_dense(size_t n, Layout& layout) const {
    const std::string& label = layout.label;
    // DSSTNE: unique examples from uniqueExamplesDim when present, else examplesDim.
    const std::string examples_dim = indexed("examplesDim", n);
    const std::string unique_dim = indexed("uniqueExamplesDim", n);
    const bool use_unique = layout.indexed && has_dim(unique_dim);
    const std::string rows_dim = use_unique ? unique_dim : examples_dim;
    const uint64_t rows = required_dim(label, rows_dim);
    const Var data_var = var(label, indexed("data", n));
    layout.rows = rows;
    layout.data = data_var;
    layout.categorical = (layout.attributes & kAttrBoolean) != 0;
    layout.boolean = layout.categorical;

    if (layout.categorical) {
        if (data_var.length != rows) {
            data_error(label, "variable '" + data_var.name + "' has " +
                                  std::to_string(data_var.length) +
                                  " entries; expected one class index per row, " + rows_dim +
                                  " = " + std::to_string(rows));
        }
        if (!is_numeric_type(data_var.type)) require_integer(label, data_var);
        return;
    }
    if (layout.cols > 0 && rows > std::numeric_limits<uint64_t>::max() / layout.cols) {
        data_error(label, rows_dim + " = " + std::to_string(rows) + " rows x width " +
                              std::to_string(layout.cols) + " overflows");
    }
    if (data_var.length != rows * layout.cols) {
        data_error(label,
                   "variable '" + data_var.name + "' has " + std::to_string(data_var.length) +
                       " entries; expected rows x width = " + std::to_string(rows) + " x " +
                       std::to_string(layout.cols) + " = " + std::to_string(rows * layout.cols) +
                       " (" + rows_dim + " x width" + std::to_string(n) + ")");
    }
    require_numeric(label, data_var);
}

// Reads dataset n keeping the entries of columns [first_col, last_col) (clamped to the width),
// `chunk` entries at a time.
Dataset Reader::read_dataset(size_t n, uint32_t first_col, uint32_t last_col,
                             uint64_t chunk) const {
    const Layout layout = inspect(n);
    Dataset d;
    d.name = layout.name;
    d.cols = layout.cols;
    d.rows = layout.rows;
    d.dense = !layout.sparse;
    // SparseIgnoreZero concerns sparse targets only; DSSTNE ignores it on dense data.
    d.sparse_ignore_zero = layout.sparse && (layout.attributes & kAttrSparseIgnoreZero) != 0;
    Band band;
    band.last = std::min(last_col, layout.cols);
    band.first = std::min(first_col, band.last);
    chunk = std::max<uint64_t>(chunk, 1);
    if (layout.sparse) {
        read_sparse(layout, band, chunk, d);
    } else if (layout.categorical) {
        read_classes(layout, band, chunk, d);
    } else {
        read_dense(layout, band, chunk, d);
    }
    if (layout.indexed) read_example_rows(layout, d);
    if (layout.weighted) read_weights(layout, d);
    if (auto names = io::read_names(file_.id(), path_, indexed("featureNames", n))) {
        d.feature_names = std::move(*names);
    }
    return d;
}

// Buffers reused from chunk to chunk of one sparse read.
struct Reader::SparseBuffers {
    std::vector<uint64_t> starts, ends;  // one block of rows
    std::vector<uint64_t> local;         // chunk-local CSR offsets
    std::vector<uint32_t> indices;       // the chunk's entries, when only a band is kept
    std::vector<float> values;
    std::vector<uint64_t> wide;  // sparseIndex of another type than uint
    // Rows scattered in the file: the stored segments read, or (whole band) the whole variables.
    std::vector<uint32_t> stored_indices;
    std::vector<float> stored_values;
    bool all_loaded = false;
    // A whole read of a compressed netCDF-4 file (preload_whole): sparseStart/sparseEnd of every
    // row, and, with entries_in_place, every entry already in d.indices/d.values, the next
    // chunk's from `cursor` on.
    std::vector<uint64_t> all_starts, all_ends;
    bool entries_in_place = false;
    uint64_t cursor = 0;
};

namespace {

// Elements [start, start + count) of an integer variable through `chunks` as non-negative
// 64-bit values; false (read it through netCDF) for another type or a negative value, which
// netCDF's path then reports where it always has.
bool read_unsigned_chunks(const io::ChunkedFile& chunks, const Reader::Var& v, uint64_t start,
                          uint64_t count, uint64_t* out, int threads) {
    using io::ChunkElement;
    if (v.type == NC_UINT64 || v.type == NC_INT64) {
        const bool is_signed = v.type == NC_INT64;
        if (!chunks.read(v.name, is_signed ? ChunkElement::kInt64 : ChunkElement::kUInt64, v.length,
                         start, count, out, threads)) {
            return false;
        }
        return !is_signed || std::none_of(out, out + count,
                                          [](uint64_t x) { return static_cast<int64_t>(x) < 0; });
    }
    if (v.type != NC_UINT && v.type != NC_INT) return false;
    std::vector<uint32_t> narrow(count);
    const bool is_signed = v.type == NC_INT;
    if (!chunks.read(v.name, is_signed ? ChunkElement::kInt32 : ChunkElement::kUInt32, v.length,
                     start, count, narrow.data(), threads)) {
        return false;
    }
    for (uint64_t i = 0; i < count; ++i) {
        if (is_signed && static_cast<int32_t>(narrow[i]) < 0) return false;
        out[i] = narrow[i];
    }
    return true;
}

// sparseIndex entries as read_indices gives them (other integer types clamped to 2^32-1).
bool read_indices_chunks(const io::ChunkedFile& chunks, const Reader::Var& v, uint64_t start,
                         uint64_t count, uint32_t* out, int threads) {
    if (v.type == NC_UINT) {
        return chunks.read(v.name, io::ChunkElement::kUInt32, v.length, start, count, out, threads);
    }
    std::vector<uint64_t> wide(count);
    if (!read_unsigned_chunks(chunks, v, start, count, wide.data(), threads)) return false;
    for (uint64_t i = 0; i < count; ++i) {
        out[i] = static_cast<uint32_t>(
            std::min<uint64_t>(wide[i], std::numeric_limits<uint32_t>::max()));
    }
    return true;
}

}  // namespace

// A whole read of a sparse dataset from a netCDF-4 file: sparseStart/sparseEnd, then (when
// every row is valid and the rows lie back to back in the file, as write_datasets and DSSTNE
// store them) sparseIndex/sparseData, each read in one pass whose chunks are inflated in
// parallel (io::ChunkedFile). Reading 20 M nonzeros through netCDF is bound by HDF5's inflate on
// one thread (docs/benchmarks.md, "Loading"). Whatever this does not read is read as before, and
// the loop of read_sparse checks every row either way, with the same messages.
void Reader::preload_whole(const Layout& layout, Dataset& d, SparseBuffers& buf) const {
    const int threads = omp_get_max_threads();
    if (d.rows == 0 || threads < 2 || !io::parallel_inflate_enabled()) return;
    int format = 0;
    if (nc_inq_format(file_.id(), &format) != NC_NOERR ||
        (format != NC_FORMAT_NETCDF4 && format != NC_FORMAT_NETCDF4_CLASSIC)) {
        return;
    }
    const io::ChunkedFile chunks(path_);
    if (!chunks.usable()) return;
    std::vector<uint64_t> starts(d.rows), ends(d.rows);
    if (!read_unsigned_chunks(chunks, layout.start, 0, d.rows, starts.data(), threads) ||
        !read_unsigned_chunks(chunks, layout.end, 0, d.rows, ends.data(), threads)) {
        return;
    }
    const uint64_t stored = layout.index.length;
    bool fits = true;
    bool any = false;
    uint64_t first = 0;
    uint64_t next = 0;
    for (uint64_t i = 0; i < d.rows && fits; ++i) {
        fits = ends[i] >= starts[i] && ends[i] <= stored;
        if (!fits || ends[i] == starts[i]) continue;  // an empty row's start does not matter
        if (!any) first = next = starts[i];
        any = true;
        fits = starts[i] == next;
        next = ends[i];
    }
    buf.all_starts = std::move(starts);
    buf.all_ends = std::move(ends);
    if (!fits) return;
    const uint64_t total = next - first;
    d.indices.resize(total);
    if (!layout.boolean) d.values.resize(total);
    if (read_indices_chunks(chunks, layout.index, first, total, d.indices.data(), threads) &&
        (layout.boolean ||
         (layout.values.type == NC_FLOAT &&
          chunks.read(layout.values.name, io::ChunkElement::kFloat32, layout.values.length, first,
                      total, d.values.data(), threads)))) {
        buf.entries_in_place = true;
        return;
    }
    d.indices.clear();
    d.values.clear();
}

// Rows are read in blocks of `chunk` (sparseStart/sparseEnd), each block in chunks of
// consecutive rows holding at most `chunk` entries together (a longer row alone).
void Reader::read_sparse(const Layout& layout, Band band, uint64_t chunk, Dataset& d) const {
    const uint64_t stored = layout.index.length;
    const bool whole = band.first == 0 && band.last == d.cols;
    d.offsets.assign(d.rows + 1, 0);
    // The entries kept: all for a whole read, else about the band's share (with a margin); a
    // reserved page that is never written is not resident.
    uint64_t expected = stored;
    if (!whole) {
        const double share = d.cols == 0 ? 0.0 : double(band.last - band.first) / d.cols;
        expected = std::min<uint64_t>(stored, static_cast<uint64_t>(1.25 * share * stored) + chunk);
    }
    d.indices.reserve(expected);
    if (!layout.boolean) d.values.reserve(expected);

    SparseBuffers buf;
    if (whole) preload_whole(layout, d, buf);
    for (uint64_t block = 0; block < d.rows; block += chunk) {
        const uint64_t count = std::min(chunk, d.rows - block);
        const uint64_t* starts = buf.all_starts.data() + block;
        const uint64_t* ends = buf.all_ends.data() + block;
        if (buf.all_starts.empty()) {
            buf.starts.resize(count);
            buf.ends.resize(count);
            read_unsigned(layout.label, layout.start, block, count, buf.starts.data());
            read_unsigned(layout.label, layout.end, block, count, buf.ends.data());
            starts = buf.starts.data();
            ends = buf.ends.data();
        }
        for (uint64_t i = 0; i < count; ++i) {
            if (ends[i] < starts[i]) {
                data_error(layout.label, "row " + std::to_string(block + i) + ": sparseEnd " +
                                             std::to_string(ends[i]) + " < sparseStart " +
                                             std::to_string(starts[i]));
            }
            if (ends[i] > stored) {
                data_error(layout.label, "row " + std::to_string(block + i) + ": sparseEnd " +
                                             std::to_string(ends[i]) + " is beyond the " +
                                             std::to_string(stored) + " stored nonzeros (" +
                                             layout.index.name + ")");
            }
        }
        for (uint64_t a = 0; a < count;) {
            uint64_t b = a + 1;
            uint64_t entries = ends[a] - starts[a];
            while (b < count && entries + (ends[b] - starts[b]) <= chunk) {
                entries += ends[b] - starts[b];
                ++b;
            }
            read_rows(layout, band, block + a, b - a, starts + a, ends + a, buf, d);
            a = b;
        }
    }
}

// Stored rows [first_row, first_row + count), whose entries lie at [starts[i], ends[i]) in the
// file: reads them, sorts and checks every row, and appends the band's entries and the rows'
// offsets to d. A whole read puts the entries straight into d.
void Reader::read_rows(const Layout& layout, Band band, uint64_t first_row, uint64_t count,
                       const uint64_t* starts, const uint64_t* ends, SparseBuffers& buf,
                       Dataset& d) const {
    const bool whole = band.first == 0 && band.last == d.cols;
    const bool has_values = !layout.boolean;
    buf.local.resize(count + 1);
    buf.local[0] = 0;
    for (uint64_t i = 0; i < count; ++i) buf.local[i + 1] = buf.local[i] + (ends[i] - starts[i]);
    const uint64_t entries = buf.local[count];
    const uint64_t base = buf.entries_in_place ? buf.cursor : d.indices.size();
    uint32_t* indices;
    float* values = nullptr;
    if (whole) {
        if (!buf.entries_in_place) {
            d.indices.resize(base + entries);
            if (has_values) d.values.resize(base + entries);
        }
        buf.cursor = base + entries;
        indices = d.indices.data() + base;
        if (has_values) values = d.values.data() + base;
    } else {
        buf.indices.resize(entries);
        indices = buf.indices.data();
        if (has_values) {
            buf.values.resize(entries);
            values = buf.values.data();
        }
    }
    if (!buf.entries_in_place) fetch_rows(layout, whole, count, starts, ends, buf, indices, values);
    sort_and_check_rows(*this, layout.label, d.cols, first_row, count, buf.local.data(), indices,
                        values);
    if (whole) {
        for (uint64_t i = 0; i < count; ++i) d.offsets[first_row + i + 1] = base + buf.local[i + 1];
        return;
    }
    for (uint64_t i = 0; i < count; ++i) {
        // Sorted rows: the band is one run of each row.
        const uint32_t* row_end = indices + buf.local[i + 1];
        const uint32_t* row = indices + buf.local[i];
        const uint32_t* lo = std::lower_bound(row, row_end, band.first);
        const uint32_t* hi = std::lower_bound(lo, row_end, band.last);
        d.indices.insert(d.indices.end(), lo, hi);
        if (has_values) {
            d.values.insert(d.values.end(), values + (lo - indices), values + (hi - indices));
        }
        d.offsets[first_row + i + 1] = d.indices.size();
    }
}

// Fills indices/values, in the chunk's CSR order (buf.local), with the stored entries of
// `count` rows. Rows back to back in the file (how DSSTNE and write_datasets store them) take
// one read. Otherwise a whole read (may_load_all) loads the whole variables once, as a whole
// read needs that memory anyway, and a band read reads the segments the rows cover, in file order.
void Reader::fetch_rows(const Layout& layout, bool may_load_all, uint64_t count,
                        const uint64_t* starts, const uint64_t* ends, SparseBuffers& buf,
                        uint32_t* indices, float* values) const {
    if (buf.local[count] == 0) return;
    if (!buf.all_loaded) {
        bool contiguous = true;
        bool any = false;
        uint64_t first = 0;
        uint64_t next = 0;
        for (uint64_t i = 0; i < count && contiguous; ++i) {
            if (ends[i] == starts[i]) continue;  // an empty row's start does not matter
            if (!any) first = next = starts[i];
            any = true;
            contiguous = starts[i] == next;
            next = ends[i];
        }
        if (contiguous) {
            read_entries(layout, first, buf.local[count], indices, values, buf.wide);
            return;
        }
        if (may_load_all) {
            const uint64_t stored = layout.index.length;
            buf.stored_indices.resize(stored);
            if (values != nullptr) buf.stored_values.resize(stored);
            read_entries(layout, 0, stored, buf.stored_indices.data(),
                         values != nullptr ? buf.stored_values.data() : nullptr, buf.wide);
            buf.all_loaded = true;
        }
    }
    // Where row i's first entry is in buf.stored_*.
    std::vector<uint64_t> at(starts, starts + count);
    if (!buf.all_loaded) {
        // The union of the rows' ranges, as segments in file order, read back to back.
        std::vector<uint64_t> order;
        for (uint64_t i = 0; i < count; ++i) {
            if (ends[i] > starts[i]) order.push_back(i);
        }
        std::sort(order.begin(), order.end(),
                  [&](uint64_t a, uint64_t b) { return starts[a] < starts[b]; });
        struct Segment {
            uint64_t begin, end, at;
        };
        std::vector<Segment> segments;
        uint64_t total = 0;
        for (const uint64_t i : order) {
            if (segments.empty() || starts[i] > segments.back().end) {
                if (!segments.empty()) total += segments.back().end - segments.back().begin;
                segments.push_back({starts[i], ends[i], total});
            } else {
                segments.back().end = std::max(segments.back().end, ends[i]);
            }
            at[i] = segments.back().at + (starts[i] - segments.back().begin);
        }
        total += segments.back().end - segments.back().begin;
        buf.stored_indices.resize(total);
        if (values != nullptr) buf.stored_values.resize(total);
        for (const Segment& s : segments) {
            read_entries(layout, s.begin, s.end - s.begin, buf.stored_indices.data() + s.at,
                         values != nullptr ? buf.stored_values.data() + s.at : nullptr, buf.wide);
        }
    }
    for (uint64_t i = 0; i < count; ++i) {
        const uint64_t len = ends[i] - starts[i];
        std::copy_n(buf.stored_indices.begin() + at[i], len, indices + buf.local[i]);
        if (values != nullptr) {
            std::copy_n(buf.stored_values.begin() + at[i], len, values + buf.local[i]);
        }
    }
}

// Stored entries [start, start + count): sparseIndex, and sparseData when `values` is given.
void Reader::read_entries(const Layout& layout, uint64_t start, uint64_t count, uint32_t* indices,
                          float* values, std::vector<uint64_t>& wide) const {
    read_indices(layout.label, layout.index, start, count, indices, wide);
    if (values != nullptr) read_values(layout.label, layout.values, start, count, values);
}

// Dense data<n>, whole rows at a time: kept as CSR of the nonzero entries.
void Reader::read_dense(const Layout& layout, Band band, uint64_t chunk, Dataset& d) const {
    d.offsets.assign(d.rows + 1, 0);
    if (d.rows == 0 || d.cols == 0) return;
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, chunk / d.cols);
    std::vector<float> dense(std::min(rows_per_chunk, d.rows) * d.cols);
    for (uint64_t first = 0; first < d.rows; first += rows_per_chunk) {
        const uint64_t count = std::min(rows_per_chunk, d.rows - first);
        read_values(layout.label, layout.data, first * d.cols, count * d.cols, dense.data());
        for (uint64_t i = 0; i < count; ++i) {
            const float* row = dense.data() + i * d.cols;
            for (uint32_t c = band.first; c < band.last; ++c) {
                if (row[c] != 0.0f) {
                    d.indices.push_back(c);
                    d.values.push_back(row[c]);
                }
            }
            d.offsets[first + i + 1] = d.indices.size();
        }
    }
}

// Dense categorical data<n>: one class index per row, a one-hot boolean row in memory.
void Reader::read_classes(const Layout& layout, Band band, uint64_t chunk, Dataset& d) const {
    d.offsets.assign(d.rows + 1, 0);
    if (band.first == 0 && band.last == d.cols) d.indices.reserve(d.rows);
    std::vector<uint64_t> classes;
    std::vector<double> raw;
    for (uint64_t first = 0; first < d.rows; first += chunk) {
        const uint64_t count = std::min(chunk, d.rows - first);
        classes.resize(count);
        read_whole_numbers(layout.label, layout.data, first, count, classes.data(), raw);
        for (uint64_t i = 0; i < count; ++i) {
            if (classes[i] >= d.cols) {
                data_error(layout.label, "row " + std::to_string(first + i) + ": class index " +
                                             std::to_string(classes[i]) + " in '" +
                                             layout.data.name + "' >= width " +
                                             std::to_string(d.cols));
            }
            if (classes[i] >= band.first && classes[i] < band.last) {
                d.indices.push_back(static_cast<uint32_t>(classes[i]));
            }
            d.offsets[first + i + 1] = d.indices.size();
        }
    }
}

// index<n>: one stored row per example.
void Reader::read_example_rows(const Layout& layout, Dataset& d) const {
    const Var& index_var = layout.example_rows;
    const std::vector<uint64_t> rows = read_unsigned(layout.label, index_var);
    for (size_t e = 0; e < rows.size(); ++e) {
        if (rows[e] >= d.rows) {
            data_error(layout.label, "example " + std::to_string(e) + ": variable '" +
                                         index_var.name + "' holds row " + std::to_string(rows[e]) +
                                         "; expected a stored row < " + std::to_string(d.rows) +
                                         " (unique examples)");
        }
        if (rows[e] > std::numeric_limits<uint32_t>::max()) {
            data_error(layout.label, "example " + std::to_string(e) + ": variable '" +
                                         index_var.name + "' holds row " + std::to_string(rows[e]) +
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
void Reader::read_weights(const Layout& layout, Dataset& d) const {
    const Var& weight_var = layout.weights;
    d.weights = read_values(layout.label, weight_var);
    for (size_t e = 0; e < d.weights.size(); ++e) {
        if (!std::isfinite(d.weights[e])) {
            data_error(layout.label, "example " + std::to_string(e) + ": variable '" +
                                         weight_var.name + "' holds " +
                                         std::to_string(d.weights[e]) +
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

// A file can declare more rows or entries than memory can hold (a CDF-5 dimension of 2^59, a
// count attribute of 4 billion datasets): the allocation then fails with std::bad_alloc or
// std::length_error, reported like every other refusal of a file, as Error(kIo) naming it.
template <typename F>
auto refusing_oversize(const std::string& path, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        throw Error(ErrorCategory::kIo,
                    path + ": the file declares more data than memory can hold (out of memory)");
    } catch (const std::length_error&) {
        throw Error(ErrorCategory::kIo,
                    path + ": the file declares more data than memory can hold (too long)");
    }
}

}  // namespace

namespace io {

Dataset read_columns(const std::string& path, const std::string& name, uint32_t first_col,
                     uint32_t last_col, uint64_t chunk_entries) {
    if (first_col > last_col) {
        throw Error(ErrorCategory::kUsage, path + ": read_columns: first column " +
                                               std::to_string(first_col) + " > last column " +
                                               std::to_string(last_col) +
                                               "; expected a band [first, last)");
    }
    return refusing_oversize(path, [&] {
        Reader reader(path);
        return reader.read_dataset(reader.find(name), first_col, last_col, chunk_entries);
    });
}

}  // namespace io

Dataset Dataset::read(const std::string& path, const std::string& name) {
    return io::read_columns(path, name, 0, std::numeric_limits<uint32_t>::max(),
                            io::kReadChunkEntries);
}

Dataset Dataset::read_columns(const std::string& path, const std::string& name, uint32_t first_col,
                              uint32_t last_col) {
    return io::read_columns(path, name, first_col, last_col, io::kReadChunkEntries);
}

std::vector<Dataset> read_datasets(const std::string& path) {
    return refusing_oversize(path, [&] {
        Reader reader(path);
        const size_t count = reader.dataset_count();
        std::vector<Dataset> result;  // not reserved: `count` is the file's word alone
        for (size_t n = 0; n < count; ++n) {
            result.push_back(reader.read_dataset(n, 0, std::numeric_limits<uint32_t>::max(),
                                                 io::kReadChunkEntries));
        }
        return result;
    });
}

DatasetShape read_dataset_shape(const std::string& path, const std::string& name) {
    return refusing_oversize(path, [&] {
        Reader reader(path);
        const Reader::Layout layout = reader.inspect(reader.find(name));
        DatasetShape shape;
        shape.name = layout.name;
        shape.cols = layout.cols;
        shape.indexed = layout.indexed;
        shape.weighted = layout.weighted;
        shape.dense = !layout.sparse;
        shape.boolean = layout.boolean;
        // read() turns an indexed dataset without examples into an empty one.
        const bool empty = layout.indexed && layout.examples == 0;
        shape.rows = empty ? 0 : layout.rows;
        shape.examples = layout.examples;
        if (empty) {
            shape.nnz = 0;
        } else if (layout.sparse) {
            shape.nnz = layout.index.length;
        } else {
            shape.nnz = layout.categorical ? layout.rows : layout.rows * layout.cols;
        }
        return shape;
    });
}

std::vector<std::string> list_datasets(const std::string& path) {
    return refusing_oversize(path, [&] { return Reader(path).names(); });
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
    // Atomic replacement, as write_model: a temporary file in the same directory, flushed to the
    // device, renamed over `path`, then the directory flushed. A failure at any step (a full disk,
    // the file size limit) leaves a previous file of that name as it was and no temporary file.
    TempFile temp(path + ".tmp." + std::to_string(static_cast<long>(getpid())));
    try {
        NcFile file;  // closed before `temp` is removed on failure
        nc_check(nc_create(temp.path().c_str(), NC_NETCDF4 | NC_CLOBBER, file.out()), path,
                 "cannot create " + temp.path());
        const int nc = file.id();
        int old_fill;
        nc_check(nc_set_fill(nc, NC_NOFILL, &old_fill), path, "setting fill mode");

        put_uint_att(nc, path, "datasets", static_cast<uint32_t>(datasets.size()));
        struct Ids {
            int start = -1, end = -1, index = -1, data = -1;  // sparse variables
            int dense = -1, example_rows = -1, weights = -1, names = -1;
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
            if (!d.feature_names.empty()) {
                ids[n].names =
                    io::define_names(nc, path, indexed("featureNames", n), d.feature_names);
            }
        }
        nc_check(nc_enddef(nc), path, "ending define mode");
        for (size_t n = 0; n < datasets.size(); ++n) {
            if (ids[n].names >= 0) io::put_names(nc, path, ids[n].names, datasets[n].feature_names);
        }

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
        if (!io::sync_path(temp.path(), false)) {
            throw Error(ErrorCategory::kIo, path + ": cannot flush " + temp.path() +
                                                " to disk (fsync): " + std::strerror(errno));
        }
        if (std::rename(temp.path().c_str(), path.c_str()) != 0) {
            throw Error(ErrorCategory::kIo, path + ": cannot rename " + temp.path() +
                                                " to it: " + std::strerror(errno));
        }
    } catch (const Error& e) {
        std::string why = e.what();
        if (why.compare(0, path.size() + 2, path + ": ") == 0) why.erase(0, path.size() + 2);
        throw Error(e.category(), path +
                                      ": not written (a previous file of that name is left as "
                                      "it was): " +
                                      why + io::storage_hint(path));
    }
    temp.commit();
    if (!io::sync_parent_directory(path)) {
        throw Error(ErrorCategory::kIo, path +
                                            ": written, but its directory could not be flushed to "
                                            "disk (fsync): " +
                                            std::strerror(errno));
    }
}

}  // namespace sparsenet
