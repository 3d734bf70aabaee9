// Dense, categorical, Indexed and Weighted datasets: round trips through write_datasets /
// Dataset::read, the file layout DSSTNE expects, and corrupt files written with the raw netCDF
// C API, each of which must be an Error naming the file, the dataset and the variable or row.
#include <gtest/gtest.h>
#include <netcdf.h>

#include <cmath>
#include <string>
#include <utility>
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

// Builds a CSR dataset from rows of (column, value) pairs; boolean when `with_values` is false.
Dataset csr(const std::string& name, uint32_t cols,
            const std::vector<std::vector<std::pair<uint32_t, float>>>& rows, bool with_values) {
    Dataset d;
    d.name = name;
    d.cols = cols;
    d.rows = rows.size();
    for (const auto& row : rows) {
        for (const auto& [c, v] : row) {
            d.indices.push_back(c);
            if (with_values) d.values.push_back(v);
        }
        d.offsets.push_back(d.indices.size());
    }
    return d;
}

// ---------------------------------------------------------------- reading our own layout back

struct FileView {
    int nc = -1;
    explicit FileView(const std::string& path) { nc_ok(nc_open(path.c_str(), NC_NOWRITE, &nc)); }
    ~FileView() { nc_close(nc); }
    unsigned att(const std::string& name) const {
        unsigned v = 0;
        EXPECT_EQ(nc_get_att_uint(nc, NC_GLOBAL, name.c_str(), &v), NC_NOERR) << name;
        return v;
    }
    bool has_var(const std::string& name) const {
        int id;
        return nc_inq_varid(nc, name.c_str(), &id) == NC_NOERR;
    }
    nc_type var_type(const std::string& name) const {
        int id;
        nc_type t = NC_NAT;
        EXPECT_EQ(nc_inq_varid(nc, name.c_str(), &id), NC_NOERR) << name;
        nc_inq_vartype(nc, id, &t);
        return t;
    }
    size_t dim(const std::string& name) const {
        int id;
        size_t len = 0;
        EXPECT_EQ(nc_inq_dimid(nc, name.c_str(), &id), NC_NOERR) << name;
        nc_inq_dimlen(nc, id, &len);
        return len;
    }
    template <typename T>
    std::vector<T> values(const std::string& name, size_t n) const {
        int id;
        std::vector<T> out(n);
        EXPECT_EQ(nc_inq_varid(nc, name.c_str(), &id), NC_NOERR) << name;
        if constexpr (std::is_same_v<T, float>) {
            EXPECT_EQ(nc_get_var_float(nc, id, out.data()), NC_NOERR) << name;
        } else {
            EXPECT_EQ(nc_get_var_uint(nc, id, out.data()), NC_NOERR) << name;
        }
        return out;
    }
    bool compressed(const std::string& name) const {
        int id, shuffle = 0, deflate = 0, level = 0, storage = 0;
        size_t chunk = 0;
        EXPECT_EQ(nc_inq_varid(nc, name.c_str(), &id), NC_NOERR) << name;
        nc_inq_var_deflate(nc, id, &shuffle, &deflate, &level);
        nc_inq_var_chunking(nc, id, &storage, &chunk);
        return shuffle == 1 && deflate == 1 && storage == NC_CHUNKED;
    }
};

// 4 rows x 5 columns with zeros, negative values and an all-zero row.
Dataset dense_analog() {
    Dataset d =
        csr("pixels", 5,
            {{{0, 0.5f}, {3, -2.0f}}, {}, {{1, 1.0f}, {2, 3.25f}, {4, 7.0f}}, {{4, -1.0f}}}, true);
    d.dense = true;
    return d;
}

TEST(DatasetKinds, DenseAnalogRoundTrip) {
    TempDir dir;
    const std::string path = dir.file("dense.nc");
    const Dataset d = dense_analog();
    write_datasets(path, {d});
    const Dataset r = Dataset::read(path);
    expect_same_dataset(r, d);
    EXPECT_TRUE(r.dense);
    EXPECT_FALSE(r.is_boolean());

    FileView f(path);
    EXPECT_EQ(f.att("attributes0"), 0u);  // not Sparse, not Boolean
    EXPECT_EQ(f.att("dataType0"), 4u);    // Float
    EXPECT_EQ(f.att("width0"), 5u);
    EXPECT_EQ(f.dim("examplesDim0"), 4u);
    EXPECT_EQ(f.dim("dataDim0"), 20u);
    EXPECT_EQ(f.var_type("data0"), NC_FLOAT);
    EXPECT_TRUE(f.compressed("data0"));
    EXPECT_FALSE(f.has_var("sparseStart0"));
    EXPECT_FALSE(f.has_var("index0"));
    EXPECT_FALSE(f.has_var("dataWeight0"));
    const std::vector<float> expected = {0.5f, 0, 0,     -2.0f, 0, 0, 0, 0, 0, 0,
                                         0,    1, 3.25f, 0,     7, 0, 0, 0, 0, -1.0f};
    EXPECT_EQ(f.values<float>("data0", 20), expected);
}

TEST(DatasetKinds, DenseCategoricalRoundTrip) {
    TempDir dir;
    const std::string path = dir.file("classes.nc");
    Dataset d = csr("label", 6, {{{5, 0}}, {{0, 0}}, {{2, 0}}, {{2, 0}}, {{3, 0}}}, false);
    d.dense = true;
    write_datasets(path, {d});
    const Dataset r = Dataset::read(path);
    expect_same_dataset(r, d);
    EXPECT_TRUE(r.is_boolean());

    FileView f(path);
    EXPECT_EQ(f.att("attributes0"), 2u);  // Boolean, not Sparse: one class index per example
    EXPECT_EQ(f.att("dataType0"), 0u);    // UInt
    EXPECT_EQ(f.dim("dataDim0"), 5u);
    EXPECT_EQ(f.var_type("data0"), NC_UINT);
    EXPECT_EQ(f.values<unsigned>("data0", 5), (std::vector<unsigned>{5, 0, 2, 2, 3}));
}

TEST(DatasetKinds, DenseBooleanWithSeveralEntriesPerRowIsWrittenAsFloatOnes) {
    TempDir dir;
    const std::string path = dir.file("multihot.nc");
    Dataset d = csr("tags", 4, {{{0, 0}, {3, 0}}, {{1, 0}}, {}}, false);
    d.dense = true;
    write_datasets(path, {d});
    {
        FileView f(path);
        EXPECT_EQ(f.att("attributes0"), 0u);
        EXPECT_EQ(f.values<float>("data0", 12),
                  (std::vector<float>{1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0}));
    }
    const Dataset r = Dataset::read(path);
    EXPECT_TRUE(r.dense);
    EXPECT_EQ(r.offsets, d.offsets);
    EXPECT_EQ(r.indices, d.indices);
    EXPECT_EQ(r.values, (std::vector<float>{1, 1, 1}));  // the same numbers, now analog
}

TEST(DatasetKinds, IndexedSparseRoundTripAndExpansion) {
    TempDir dir;
    const std::string path = dir.file("indexed.nc");
    Dataset d = csr("sessions", 9,
                    {{{1, 0.5f}, {8, 1.5f}}, {}, {{0, 2.0f}}, {{3, 1}, {4, 2}, {5, 3}}}, true);
    d.example_rows = {2, 0, 2, 3, 1, 2, 0};
    ASSERT_TRUE(d.is_indexed());
    EXPECT_EQ(d.examples(), 7u);
    EXPECT_EQ(d.rows, 4u);
    write_datasets(path, {d});
    expect_same_dataset(Dataset::read(path), d);

    {
        FileView f(path);
        EXPECT_EQ(f.att("attributes0"), 1u + 64u);  // Sparse | Indexed
        EXPECT_EQ(f.dim("examplesDim0"), 7u);
        EXPECT_EQ(f.dim("uniqueExamplesDim0"), 4u);
        EXPECT_EQ(f.dim("sparseDataDim0"), 6u);
        EXPECT_EQ(f.var_type("index0"), NC_UINT);
        EXPECT_TRUE(f.compressed("index0"));
        EXPECT_EQ(f.values<unsigned>("index0", 7), (std::vector<unsigned>{2, 0, 2, 3, 1, 2, 0}));
    }

    // expanded(): one CSR row per example, built here row by row from the stored rows.
    const Dataset e = d.expanded();
    EXPECT_FALSE(e.is_indexed());
    EXPECT_EQ(e.rows, 7u);
    EXPECT_EQ(e.examples(), 7u);
    e.validate("expanded");
    for (uint64_t ex = 0; ex < 7; ++ex) {
        const uint32_t stored = d.example_rows[ex];
        ASSERT_EQ(e.row_length(ex), d.row_length(stored)) << "example " << ex;
        for (uint64_t k = 0; k < e.row_length(ex); ++k) {
            EXPECT_EQ(e.indices[e.offsets[ex] + k], d.indices[d.offsets[stored] + k]);
            EXPECT_EQ(e.values[e.offsets[ex] + k], d.values[d.offsets[stored] + k]);
        }
    }
    EXPECT_EQ(e.nnz(), 1u + 2 + 1 + 3 + 0 + 1 + 2);
}

TEST(DatasetKinds, WeightedSparseRoundTrip) {
    TempDir dir;
    const std::string path = dir.file("weighted.nc");
    Dataset d = testing::random_dataset(50, 30, RowShape::kPowerLaw, false, 11, "clicks");
    for (uint64_t r = 0; r < d.rows; ++r) d.weights.push_back(0.25f * float(r % 7) - 0.5f);
    write_datasets(path, {d});
    expect_same_dataset(Dataset::read(path), d);

    FileView f(path);
    EXPECT_EQ(f.att("attributes0"), 1u + 2u + 128u);  // Sparse | Boolean | Weighted
    EXPECT_EQ(f.var_type("dataWeight0"), NC_FLOAT);
    EXPECT_TRUE(f.compressed("dataWeight0"));
    EXPECT_EQ(f.values<float>("dataWeight0", 50), d.weights);
}

TEST(DatasetKinds, IndexedWeightedDenseAndCategoricalInOneFile) {
    TempDir dir;
    const std::string path = dir.file("all.nc");
    Dataset pixels = dense_analog();
    pixels.example_rows = {3, 3, 0, 2, 1};
    pixels.weights = {1.0f, 2.0f, 0.5f, 0.0f, 4.0f};
    Dataset label = csr("label", 3, {{{1, 0}}, {{2, 0}}}, false);
    label.dense = true;
    label.example_rows = {0, 1, 1, 0, 0};
    label.weights = {1, 1, 1, 1, 3};
    const Dataset plain = testing::random_dataset(5, 8, RowShape::kUniform, true, 12, "plain");
    write_datasets(path, {pixels, label, plain});

    const std::vector<Dataset> all = read_datasets(path);
    ASSERT_EQ(all.size(), 3u);
    expect_same_dataset(all[0], pixels);
    expect_same_dataset(all[1], label);
    expect_same_dataset(all[2], plain);
    FileView f(path);
    EXPECT_EQ(f.att("attributes0"), 64u + 128u);
    EXPECT_EQ(f.att("attributes1"), 2u + 64u + 128u);
    EXPECT_EQ(f.att("attributes2"), 1u);
    EXPECT_EQ(f.dim("uniqueExamplesDim0"), 4u);
    EXPECT_EQ(f.dim("dataDim0"), 20u);
    EXPECT_EQ(f.dim("uniqueExamplesDim1"), 2u);
    EXPECT_EQ(f.dim("dataDim1"), 2u);
    EXPECT_EQ(f.values<unsigned>("data1", 2), (std::vector<unsigned>{1, 2}));
}

TEST(DatasetKinds, ValidateChecksWeightsAndExampleRows) {
    Dataset d = csr("d", 4, {{{0, 0}}, {{1, 0}}, {{2, 0}}}, false);
    d.validate("ok");
    auto check = [](const Dataset& bad, const std::string& expected) {
        const std::string msg =
            expect_error([&] { bad.validate("file.nc"); }, ErrorCategory::kData);
        EXPECT_TRUE(contains(msg, "file.nc: dataset d: ")) << msg;
        EXPECT_TRUE(contains(msg, expected)) << msg << " (expected " << expected << ")";
    };
    Dataset bad = d;
    bad.weights = {1, 2};
    check(bad, "weights has 2 entries; expected 0 (unweighted) or 3 (one per example)");
    bad.weights = {1, std::nanf(""), 2};
    check(bad, "example 1: weight nan is not finite");
    bad = d;
    bad.example_rows = {0, 2, 3, 1};
    check(bad, "example 2: example_rows entry 3 >= rows 3");
    const std::string msg = expect_error([&] { bad.expanded(); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, "dataset d: example 2: example_rows entry 3 >= rows 3")) << msg;
    bad.example_rows = {0, 2, 2, 1};
    bad.weights = {1, 1, 1};  // weights follow the examples (4), not the stored rows (3)
    check(bad, "weights has 3 entries; expected 0 (unweighted) or 4 (one per example)");
    bad.weights = {1, 1, 1, 1};
    bad.validate("ok");
}

// ---------------------------------------------------------------- raw DSSTNE-style files

// A netCDF file spelled out attribute by attribute and variable by variable, so tests can
// write exactly what DSSTNE writes, or anything broken.
struct RawVar {
    std::string name;
    nc_type type;
    std::string dim;
    std::vector<double> data;
};

struct RawFile {
    std::vector<std::pair<std::string, unsigned>> uint_atts;
    std::vector<std::pair<std::string, std::string>> text_atts;
    std::vector<std::pair<std::string, size_t>> dims;
    std::vector<RawVar> vars;

    RawVar& var(const std::string& name) {
        for (RawVar& v : vars) {
            if (v.name == name) return v;
        }
        ADD_FAILURE() << "no variable " << name;
        return vars.front();
    }
    void set_dim(const std::string& name, size_t len) {
        for (auto& d : dims) {
            if (d.first == name) d.second = len;
        }
    }
    void set_att(const std::string& name, unsigned value) {
        for (auto& a : uint_atts) {
            if (a.first == name) a.second = value;
        }
    }
    void remove_var(const std::string& name) {
        for (size_t i = 0; i < vars.size(); ++i) {
            if (vars[i].name == name) vars.erase(vars.begin() + i);
        }
    }

    void write(const std::string& path) const {
        int nc;
        nc_ok(nc_create(path.c_str(), NC_NETCDF4 | NC_CLOBBER, &nc));
        for (const auto& [name, value] : uint_atts) {
            nc_ok(nc_put_att_uint(nc, NC_GLOBAL, name.c_str(), NC_UINT, 1, &value));
        }
        for (const auto& [name, value] : text_atts) {
            nc_ok(nc_put_att_text(nc, NC_GLOBAL, name.c_str(), value.size(), value.c_str()));
        }
        for (const auto& [name, len] : dims) {
            int id;
            nc_ok(nc_def_dim(nc, name.c_str(), len, &id));
        }
        std::vector<int> ids;
        for (const RawVar& v : vars) {
            int dim, id;
            nc_ok(nc_inq_dimid(nc, v.dim.c_str(), &dim));
            nc_ok(nc_def_var(nc, v.name.c_str(), v.type, 1, &dim, &id));
            ids.push_back(id);
        }
        nc_ok(nc_enddef(nc));
        for (size_t i = 0; i < vars.size(); ++i) {
            if (vars[i].data.empty()) continue;
            const size_t start = 0, count = vars[i].data.size();
            nc_ok(nc_put_vara_double(nc, ids[i], &start, &count, vars[i].data.data()));
        }
        nc_ok(nc_close(nc));
    }
};

RawFile header(const std::string& name, unsigned attributes, unsigned data_type, unsigned width) {
    RawFile f;
    f.uint_atts = {{"datasets", 1},          {"attributes0", attributes}, {"kind0", 0},
                   {"dataType0", data_type}, {"dimensions0", 1},          {"width0", width}};
    f.text_atts = {{"name0", name}};
    return f;
}

// DSSTNE-style indexed, weighted boolean sparse data: 3 stored rows over width 8, 5 examples,
// uint32 offsets as generateNetCDF writes them.
//   stored rows: 0 = {1, 4}, 1 = {0}, 2 = {2, 7}; examples use rows 0 2 1 2 0.
RawFile indexed_sparse() {
    RawFile f = header("clicks", 1 + 2 + 64 + 128, 0, 8);
    f.dims = {{"examplesDim0", 5}, {"uniqueExamplesDim0", 3}, {"sparseDataDim0", 5}};
    f.vars = {{"sparseStart0", NC_UINT, "uniqueExamplesDim0", {0, 2, 3}},
              {"sparseEnd0", NC_UINT, "uniqueExamplesDim0", {2, 3, 5}},
              {"sparseIndex0", NC_UINT, "sparseDataDim0", {1, 4, 0, 2, 7}},
              {"index0", NC_UINT, "examplesDim0", {0, 2, 1, 2, 0}},
              {"dataWeight0", NC_FLOAT, "examplesDim0", {1, 0.5, 2, 1, 1}}};
    return f;
}

// Dense float data, 3 examples x 4 columns, weighted.
RawFile dense_weighted() {
    RawFile f = header("pixels", 128, 4, 4);
    f.dims = {{"examplesDim0", 3}, {"dataDim0", 12}};
    f.vars = {{"data0", NC_FLOAT, "dataDim0", {0, 1, 0, 2, 0, 0, 0, 0, 3, 0, 0, 4}},
              {"dataWeight0", NC_FLOAT, "examplesDim0", {1, 2, 3}}};
    return f;
}

// DSSTNE's categorical dense data: Boolean, one class index per example, stored as float
// (the dataset's type, dataType Float).
RawFile dense_categorical() {
    RawFile f = header("label", 2, 4, 4);
    f.dims = {{"examplesDim0", 4}, {"dataDim0", 4}};
    f.vars = {{"data0", NC_FLOAT, "dataDim0", {3, 0, 0, 2}}};
    return f;
}

TEST(DatasetKindsRaw, ReadsDsstneIndexedWeightedSparse) {
    TempDir dir;
    const std::string path = dir.file("raw.nc");
    indexed_sparse().write(path);
    const Dataset d = Dataset::read(path);
    EXPECT_EQ(d.name, "clicks");
    EXPECT_EQ(d.rows, 3u);
    EXPECT_EQ(d.examples(), 5u);
    EXPECT_TRUE(d.is_boolean());
    EXPECT_FALSE(d.dense);
    EXPECT_EQ(d.offsets, (std::vector<uint64_t>{0, 2, 3, 5}));
    EXPECT_EQ(d.indices, (std::vector<uint32_t>{1, 4, 0, 2, 7}));
    EXPECT_EQ(d.example_rows, (std::vector<uint32_t>{0, 2, 1, 2, 0}));
    EXPECT_EQ(d.weights, (std::vector<float>{1, 0.5f, 2, 1, 1}));
    d.validate("raw");
}

TEST(DatasetKindsRaw, IndexedWithoutUniqueDimensionTakesTheOffsetsLength) {
    TempDir dir;
    const std::string path = dir.file("raw.nc");
    RawFile f = indexed_sparse();
    f.dims.erase(f.dims.begin() + 1);  // no uniqueExamplesDim0
    f.dims.push_back({"rowsDim", 3});
    f.var("sparseStart0").dim = "rowsDim";
    f.var("sparseEnd0").dim = "rowsDim";
    f.write(path);
    const Dataset d = Dataset::read(path);
    EXPECT_EQ(d.rows, 3u);
    EXPECT_EQ(d.examples(), 5u);
}

TEST(DatasetKindsRaw, ReadsDenseAndFloatCategoricalData) {
    TempDir dir;
    const std::string dense_path = dir.file("dense.nc");
    dense_weighted().write(dense_path);
    const Dataset d = Dataset::read(dense_path);
    EXPECT_TRUE(d.dense);
    EXPECT_EQ(d.rows, 3u);
    EXPECT_EQ(d.cols, 4u);
    EXPECT_EQ(d.offsets, (std::vector<uint64_t>{0, 2, 2, 4}));
    EXPECT_EQ(d.indices, (std::vector<uint32_t>{1, 3, 0, 3}));
    EXPECT_EQ(d.values, (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(d.weights, (std::vector<float>{1, 2, 3}));

    const std::string cat_path = dir.file("categorical.nc");
    dense_categorical().write(cat_path);
    const Dataset c = Dataset::read(cat_path);
    EXPECT_TRUE(c.dense);
    EXPECT_TRUE(c.is_boolean());
    EXPECT_EQ(c.offsets, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(c.indices, (std::vector<uint32_t>{3, 0, 0, 2}));
}

TEST(DatasetKindsRaw, IndexedDatasetWithoutExamplesIsEmpty) {
    TempDir dir;
    const std::string path = dir.file("raw.nc");
    RawFile f = indexed_sparse();
    f.set_dim("examplesDim0", 0);
    f.var("index0").data.clear();
    f.var("dataWeight0").data.clear();
    f.write(path);
    const Dataset d = Dataset::read(path);
    EXPECT_EQ(d.examples(), 0u);
    EXPECT_EQ(d.rows, 0u);
    EXPECT_EQ(d.nnz(), 0u);
    d.validate("raw");
}

// Writes `f`, reads it, expects Error(kData) whose message holds the path, the dataset and
// every string of `mentions`.
void expect_corrupt(const RawFile& f, const std::string& dataset,
                    const std::vector<std::string>& mentions) {
    TempDir dir;
    const std::string path = dir.file("corrupt.nc");
    f.write(path);
    const std::string msg = expect_error([&] { read_datasets(path); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path + ": dataset " + dataset + ": ")) << msg;
    for (const std::string& m : mentions) {
        EXPECT_TRUE(contains(msg, m)) << "missing '" << m << "' in: " << msg;
    }
}

TEST(DatasetKindsCorrupt, OffsetBeyondTheStoredNonzeros) {
    RawFile f = indexed_sparse();
    f.var("sparseEnd0").data = {2, 3, 6};
    expect_corrupt(f, "clicks",
                   {"row 2: sparseEnd 6 is beyond the 5 stored nonzeros", "sparseIndex0"});
    f = indexed_sparse();
    f.var("sparseStart0").data = {0, 9, 3};  // start past the data and past its end
    expect_corrupt(f, "clicks", {"row 1: sparseEnd 3 < sparseStart 9"});
}

TEST(DatasetKindsCorrupt, EndBeforeStart) {
    RawFile f = indexed_sparse();
    f.var("sparseStart0").data = {0, 3, 3};
    f.var("sparseEnd0").data = {2, 2, 5};
    expect_corrupt(f, "clicks", {"row 1: sparseEnd 2 < sparseStart 3"});
}

TEST(DatasetKindsCorrupt, ColumnIndexPastTheWidth) {
    RawFile f = indexed_sparse();
    f.var("sparseIndex0").data = {1, 4, 0, 2, 8};
    expect_corrupt(f, "clicks", {"row 2: column index 8 >= width 8"});
}

TEST(DatasetKindsCorrupt, ExampleIndexPastTheUniqueRows) {
    RawFile f = indexed_sparse();
    f.var("index0").data = {0, 2, 3, 2, 0};
    expect_corrupt(f, "clicks",
                   {"example 2: variable 'index0' holds row 3; expected a stored row < 3"});
    f.var("index0").type = NC_INT;
    f.var("index0").data = {0, -1, 1, 2, 0};
    expect_corrupt(f, "clicks", {"variable 'index0' element 1 is -1"});
}

TEST(DatasetKindsCorrupt, WrongVariableLengths) {
    RawFile f = indexed_sparse();
    f.dims.push_back({"fourDim", 4});
    f.var("index0").dim = "fourDim";
    f.var("index0").data = {0, 1, 2, 0};
    expect_corrupt(
        f, "clicks",
        {"variable 'index0' has 4 entries; expected examplesDim0 = 5 (one per example)"});

    f = indexed_sparse();
    f.dims.push_back({"fourDim", 4});
    f.var("dataWeight0").dim = "fourDim";
    f.var("dataWeight0").data = {1, 1, 1, 1};
    expect_corrupt(f, "clicks",
                   {"variable 'dataWeight0' has 4 entries; expected 5 (one weight per example)"});

    f = indexed_sparse();
    f.set_dim("uniqueExamplesDim0", 2);
    f.dims.push_back({"threeDim", 3});
    f.var("sparseStart0").dim = "threeDim";
    f.var("sparseEnd0").dim = "threeDim";
    expect_corrupt(f, "clicks", {"sparseStart0 has 3 entries; expected uniqueExamplesDim0 = 2"});

    f = dense_weighted();
    f.set_dim("dataDim0", 11);
    f.var("data0").data.pop_back();
    expect_corrupt(f, "pixels",
                   {"variable 'data0' has 11 entries; expected rows x width = 3 x 4 = 12"});

    f = dense_categorical();
    f.set_dim("dataDim0", 5);
    f.var("data0").data.push_back(1);
    expect_corrupt(
        f, "label",
        {"variable 'data0' has 5 entries; expected one class index per row", "examplesDim0 = 4"});
}

TEST(DatasetKindsCorrupt, MissingVariablesAndDimensions) {
    RawFile f = indexed_sparse();
    f.remove_var("index0");
    expect_corrupt(f, "clicks", {"missing variable 'index0'"});
    f = indexed_sparse();
    f.remove_var("dataWeight0");
    expect_corrupt(f, "clicks", {"missing variable 'dataWeight0'"});
    f = dense_weighted();
    f.remove_var("data0");
    expect_corrupt(f, "pixels", {"missing variable 'data0'"});
    f = dense_weighted();
    f.dims[0].first = "otherDim";
    f.var("dataWeight0").dim = "otherDim";
    expect_corrupt(f, "pixels", {"missing dimension 'examplesDim0'"});
}

TEST(DatasetKindsCorrupt, BadValues) {
    RawFile f = dense_categorical();
    f.var("data0").data = {3, 4, 0, 2};
    expect_corrupt(f, "label", {"row 1: class index 4 in 'data0' >= width 4"});
    f.var("data0").data = {3, 1.5, 0, 2};
    expect_corrupt(f, "label", {"variable 'data0' element 1 is 1.5", "whole number"});
    f = dense_weighted();
    f.var("dataWeight0").data = {1, std::nan(""), 3};
    expect_corrupt(f, "pixels",
                   {"example 1: variable 'dataWeight0' holds nan", "expected a finite weight"});
    f = indexed_sparse();
    f.var("dataWeight0").type = NC_CHAR;
    f.var("dataWeight0").data.clear();
    expect_corrupt(f, "clicks", {"variable 'dataWeight0' has type char; expected a numeric type"});
}

TEST(DatasetKindsCorrupt, TruncatedFileAndNonNetcdfFile) {
    TempDir dir;
    const std::string good = dir.file("good.nc");
    Dataset big = testing::random_dataset(4000, 300, RowShape::kPowerLaw, true, 13, "big");
    big.example_rows.resize(9000);
    for (size_t e = 0; e < big.example_rows.size(); ++e) {
        big.example_rows[e] = static_cast<uint32_t>((e * 7919) % big.rows);
    }
    big.weights.assign(9000, 0.5f);
    Dataset dense = testing::random_dataset(500, 40, RowShape::kUniform, true, 14, "dense");
    dense.dense = true;
    write_datasets(good, {big, dense});
    ASSERT_EQ(read_datasets(good).size(), 2u);

    const std::string bytes = testing::read_file(good);
    ASSERT_GT(bytes.size(), 10000u);
    const std::string truncated = dir.file("truncated.nc");
    testing::write_file(truncated, bytes.substr(0, bytes.size() / 2));
    std::string msg = expect_error([&] { read_datasets(truncated); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(msg, truncated)) << msg;
    EXPECT_TRUE(contains(msg, "truncated or corrupt")) << msg;

    const std::string text = dir.file("text.nc");
    testing::write_file(text, "user1\t1,5:2,3\nuser2\t7,1\n");
    msg = expect_error([&] { read_datasets(text); }, ErrorCategory::kIo);
    EXPECT_TRUE(contains(msg, text)) << msg;
    EXPECT_TRUE(contains(msg, "not a netCDF file")) << msg;
}

TEST(DatasetKindsCorrupt, WriterRejectsInvalidKinds) {
    TempDir dir;
    const std::string path = dir.file("bad.nc");
    Dataset d = testing::random_dataset(5, 5, RowShape::kUniform, false, 1, "broken");
    d.example_rows = {0, 5};
    std::string msg = expect_error([&] { write_datasets(path, {d}); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, path + ": dataset broken: example 1: example_rows entry 5 >= rows 5"))
        << msg;
    d.example_rows.clear();
    d.weights = {1, 2};
    msg = expect_error([&] { write_datasets(path, {d}); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, "weights has 2 entries")) << msg;
}

// SparseIgnoreZero (attribute bit 32): written for sparse datasets that set it, read back, kept
// by expanded(); on a dense dataset DSSTNE ignores the bit, and so does the reader.
TEST(DatasetKinds, SparseIgnoreZeroRoundTripsAsAttributeBit32) {
    TempDir dir;
    const std::string path = dir.file("ignore_zero.nc");
    Dataset on = testing::random_dataset(6, 9, RowShape::kUniform, true, 3, "targets");
    on.sparse_ignore_zero = true;
    Dataset off = testing::random_dataset(4, 9, RowShape::kUniform, false, 4, "plain");
    write_datasets(path, {on, off});
    int nc;
    nc_ok(nc_open(path.c_str(), NC_NOWRITE, &nc));
    unsigned a0 = 0, a1 = 0;
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "attributes0", &a0));
    nc_ok(nc_get_att_uint(nc, NC_GLOBAL, "attributes1", &a1));
    nc_ok(nc_close(nc));
    EXPECT_EQ(a0, 1u + 32u);  // Sparse | SparseIgnoreZero (analog)
    EXPECT_EQ(a1, 1u + 2u);   // Sparse | Boolean
    const std::vector<Dataset> back = read_datasets(path);
    ASSERT_EQ(back.size(), 2u);
    expect_same_dataset(back[0], on);
    EXPECT_TRUE(back[0].sparse_ignore_zero);
    EXPECT_FALSE(back[1].sparse_ignore_zero);
    Dataset indexed = back[0];
    indexed.example_rows = {0, 0, 5};
    EXPECT_TRUE(indexed.expanded().sparse_ignore_zero);

    // A DSSTNE file with the bit on its indexed sparse dataset.
    RawFile f = indexed_sparse();
    f.set_att("attributes0", 1 + 2 + 32 + 64 + 128);
    const std::string raw = dir.file("raw_ignore_zero.nc");
    f.write(raw);
    EXPECT_TRUE(Dataset::read(raw).sparse_ignore_zero);
    // On dense data the bit is ignored (DSSTNE's dense kernels never look at it).
    RawFile dense = dense_weighted();
    dense.set_att("attributes0", 128 + 32);
    dense.write(raw);
    const Dataset d = Dataset::read(raw);
    EXPECT_TRUE(d.dense);
    EXPECT_FALSE(d.sparse_ignore_zero);
    // In memory a dense dataset with the flag is invalid, so it is never written.
    Dataset bad = d;
    bad.sparse_ignore_zero = true;
    const std::string msg =
        expect_error([&] { write_datasets(dir.file("bad.nc"), {bad}); }, ErrorCategory::kData);
    EXPECT_TRUE(contains(msg, "sparse_ignore_zero")) << msg;
}

}  // namespace
}  // namespace sparsenet
