// sparsenet._core: errors, Dataset, text conversion, index files, ranking metrics and recs files.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common.h"
#include "sparsenet/convert.h"
#include "sparsenet/index_file.h"
#include "sparsenet/metrics.h"
#include "sparsenet/predictor.h"

namespace sparsenet::python {
namespace {

const char* error_class(ErrorCategory c) {
    switch (c) {
        case ErrorCategory::kConfig:
            return "ConfigError";
        case ErrorCategory::kData:
            return "DataError";
        case ErrorCategory::kIo:
            return "FileError";
        case ErrorCategory::kDevice:
            return "DeviceError";
        case ErrorCategory::kCommunication:
            return "CommunicationError";
        case ErrorCategory::kNumeric:
            return "NumericError";
        case ErrorCategory::kUsage:
            return "UsageError";
        case ErrorCategory::kNotImplemented:
            return "NotImplementedFeature";
        case ErrorCategory::kInternal:
            return "InternalError";
    }
    return "Error";
}

template <class In, class Out>
void copy_checked(const In* in, size_t n, std::vector<Out>& out, const std::string& what,
                  bool is_index, uint64_t max) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const In v = in[i];
        if (is_index) {
            if constexpr (std::is_floating_point_v<In>) {
                throw Error(ErrorCategory::kData, what + ": expected integers, found floats");
            } else {
                if ((std::is_signed_v<In> && v < 0) || uint64_t(v) > max) {
                    throw Error(ErrorCategory::kData, what + ": entry " + std::to_string(i) +
                                                          " is " + std::to_string(v) +
                                                          "; expected 0 .. " + std::to_string(max));
                }
            }
        }
        out[i] = static_cast<Out>(v);
    }
}

}  // namespace

template <class Out>
std::vector<Out> to_vector(const AnyArray& a, const std::string& what, bool is_index,
                           uint64_t max) {
    std::vector<Out> out;
    const size_t n = a.shape(0);
    const nb::dlpack::dtype t = a.dtype();
    const void* p = a.data();
    if (t == nb::dtype<int32_t>()) {
        copy_checked(static_cast<const int32_t*>(p), n, out, what, is_index, max);
    } else if (t == nb::dtype<int64_t>()) {
        copy_checked(static_cast<const int64_t*>(p), n, out, what, is_index, max);
    } else if (t == nb::dtype<uint32_t>()) {
        copy_checked(static_cast<const uint32_t*>(p), n, out, what, is_index, max);
    } else if (t == nb::dtype<uint64_t>()) {
        copy_checked(static_cast<const uint64_t*>(p), n, out, what, is_index, max);
    } else if (t == nb::dtype<float>()) {
        copy_checked(static_cast<const float*>(p), n, out, what, is_index, max);
    } else if (t == nb::dtype<double>()) {
        copy_checked(static_cast<const double*>(p), n, out, what, is_index, max);
    } else {
        throw Error(ErrorCategory::kData,
                    what +
                        ": unsupported dtype; expected int32, int64, uint32, uint64, "
                        "float32 or float64");
    }
    return out;
}
template std::vector<uint64_t> to_vector(const AnyArray&, const std::string&, bool, uint64_t);
template std::vector<uint32_t> to_vector(const AnyArray&, const std::string&, bool, uint64_t);
template std::vector<float> to_vector(const AnyArray&, const std::string&, bool, uint64_t);

void bind_errors(nb::module_& m) {
    // sparsenet.Error and its per-category subclasses live in sparsenet/_errors.py; the
    // translator raises the class of the error's category with the library's message.
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const Error& e) {
            nb::object cls =
                nb::module_::import_("sparsenet._errors").attr(error_class(e.category()));
            PyErr_SetString(cls.ptr(), e.what());
        }
    });
}

namespace {

nb::dict stats_dict(const ConvertStats& s) {
    nb::dict d;
    d["files"] = s.files;
    d["lines"] = s.lines;
    d["interactions"] = s.interactions;
    d["below_min_rating"] = s.below_min_rating;
    d["dropped_unknown"] = s.dropped_unknown;
    d["distinct_dropped"] = s.distinct_dropped;
    d["new_samples"] = s.new_samples;
    d["new_features"] = s.new_features;
    d["samples_without_line"] = s.samples_without_line;
    d["header_skipped"] = s.header_skipped;
    d["format"] = std::string(to_string(s.format));
    return d;
}

LabelIndex index_of(const std::optional<std::vector<std::string>>& labels) {
    LabelIndex index;
    if (!labels) return index;
    for (const std::string& l : *labels) {
        if (index.insert(l) != index.size() - 1) {
            throw Error(ErrorCategory::kData, "index: label '" + l + "' is listed twice");
        }
    }
    return index;
}

std::vector<std::string> labels_of(const LabelIndex& index) {
    std::vector<std::string> out;
    out.reserve(index.size());
    for (size_t i = 0; i < index.size(); ++i) out.push_back(index.label(uint32_t(i)));
    return out;
}

// A TopK from (rows, k) arrays as predict returns them.
TopK top_k_of(const nb::ndarray<const uint32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>& ids,
              const nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>& scores) {
    if (ids.shape(0) != scores.shape(0) || ids.shape(1) != scores.shape(1)) {
        throw Error(ErrorCategory::kData, "ids and scores: shapes differ");
    }
    TopK top;
    top.rows = ids.shape(0);
    top.k = uint32_t(ids.shape(1));
    top.indices.assign(ids.data(), ids.data() + ids.size());
    top.scores.assign(scores.data(), scores.data() + scores.size());
    return top;
}

// predict's recs format (tools/predict.cpp): 'name<TAB>item,score:item,score...' per row, scores
// with %.6g, names from the indexes or row and column numbers.
void write_recs(const std::string& path,
                const nb::ndarray<const uint32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>& ids,
                const nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>& scores,
                const std::vector<std::string>& sample_names,
                const std::vector<std::string>& feature_names) {
    const TopK top = top_k_of(ids, scores);
    nb::gil_scoped_release release;
    auto label = [](const std::vector<std::string>& names, uint64_t i) {
        return i < names.size() ? names[i] : std::to_string(i);
    };
    const std::string tmp = path + ".tmp";
    FILE* out = std::fopen(tmp.c_str(), "w");
    if (out == nullptr) {
        throw Error(ErrorCategory::kIo,
                    path + ": cannot write " + tmp + ": " + std::strerror(errno));
    }
    bool ok = true;
    for (uint64_t r = 0; r < top.rows && ok; ++r) {
        std::string line = label(sample_names, r);
        line += '\t';
        for (uint32_t i = 0; i < top.k; ++i) {
            const uint32_t item = top.indices[r * top.k + i];
            if (item == std::numeric_limits<uint32_t>::max()) break;
            char score[32];
            std::snprintf(score, sizeof score, "%.6g", top.scores[r * top.k + i]);
            if (i > 0) line += ':';
            line += label(feature_names, item) + "," + score;
        }
        line += '\n';
        ok = std::fputs(line.c_str(), out) != EOF;
    }
    ok = std::fclose(out) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw Error(ErrorCategory::kIo, path + ": write failed: " + std::strerror(errno));
    }
}

nb::dict report_dict(const RankingReport& r) {
    nb::dict d;
    d["rows"] = r.rows;
    d["users"] = r.users;
    d["items"] = r.items;
    for (const MetricsAtK& m : r.at) {
        for (const std::string& name : metric_names()) {
            d[(name + "@" + std::to_string(m.k)).c_str()] = metric_value(m, name);
        }
        d[("covered_items@" + std::to_string(m.k)).c_str()] = m.covered_items;
    }
    return d;
}

}  // namespace

nb::dict ranking_report_dict(const RankingReport& r) {
    return report_dict(r);
}

void bind_dataset(nb::module_& m) {
    nb::class_<Dataset>(m, "Dataset", "A CSR dataset held by the library (sparsenet::Dataset).")
        .def_static(
            "from_csr",
            [](const AnyArray& indptr, const AnyArray& indices, std::optional<AnyArray> data,
               uint64_t rows, uint64_t cols, const std::string& name,
               std::optional<AnyArray> weights) {
                if (cols > UINT32_MAX) {
                    throw Error(ErrorCategory::kData,
                                "shape: " + std::to_string(cols) + " columns; at most 2^32-1");
                }
                Dataset d;
                d.name = name;
                d.rows = rows;
                d.cols = uint32_t(cols);
                d.offsets = to_vector<uint64_t>(indptr, "indptr", true);
                d.indices = to_vector<uint32_t>(indices, "indices", true, cols == 0 ? 0 : cols - 1);
                if (data) d.values = to_vector<float>(*data, "data", false);
                if (weights) d.weights = to_vector<float>(*weights, "weights", false);
                if (d.offsets.size() != rows + 1) {
                    throw Error(ErrorCategory::kData,
                                "indptr: " + std::to_string(d.offsets.size()) + " entries for " +
                                    std::to_string(rows) + " rows; expected rows + 1");
                }
                d.validate("dataset '" + name + "'");
                return d;
            },
            nb::arg("indptr"), nb::arg("indices"), nb::arg("data").none(), nb::arg("rows"),
            nb::arg("cols"), nb::arg("name"), nb::arg("weights").none() = nb::none(),
            "A dataset from CSR arrays (copied into the library's layout and checked).")
        .def_static(
            "read",
            [](const std::string& path, const std::string& name) {
                nb::gil_scoped_release release;
                return Dataset::read(path, name);
            },
            nb::arg("path"), nb::arg("name") = "",
            "Dataset `name` (or the first) of a netCDF file.")
        .def_static(
            "read_all",
            [](const std::string& path) {
                nb::gil_scoped_release release;
                return read_datasets(path);
            },
            nb::arg("path"), "Every dataset of a netCDF file, in file order.")
        .def_static("list", &list_datasets, nb::arg("path"),
                    "The names of the datasets in a netCDF file.")
        .def_rw("name", &Dataset::name)
        .def_ro("rows", &Dataset::rows)
        .def_ro("cols", &Dataset::cols)
        .def_ro("dense", &Dataset::dense)
        .def_rw("sparse_ignore_zero", &Dataset::sparse_ignore_zero)
        .def_prop_ro("nnz", &Dataset::nnz)
        .def_prop_ro("examples", &Dataset::examples)
        .def_prop_ro("is_boolean", &Dataset::is_boolean)
        .def_prop_ro("is_indexed", &Dataset::is_indexed)
        .def_prop_ro("is_weighted", &Dataset::is_weighted)
        .def_prop_ro(
            "indptr",
            [](nb::handle self) {
                const Dataset& d = nb::cast<const Dataset&>(self);
                return nb::ndarray<nb::numpy, const uint64_t, nb::ndim<1>>(
                    d.offsets.data(), {d.offsets.size()}, self);
            },
            "Row offsets (uint64, rows + 1): a read-only view of the library's buffer.")
        .def_prop_ro(
            "indices",
            [](nb::handle self) {
                const Dataset& d = nb::cast<const Dataset&>(self);
                return nb::ndarray<nb::numpy, const uint32_t, nb::ndim<1>>(
                    d.indices.data(), {d.indices.size()}, self);
            },
            "Column ids (uint32, nnz): a read-only view of the library's buffer.")
        .def_prop_ro(
            "data",
            [](nb::handle self) -> nb::object {
                const Dataset& d = nb::cast<const Dataset&>(self);
                if (d.is_boolean()) return nb::none();
                return nb::cast(nb::ndarray<nb::numpy, const float, nb::ndim<1>>(
                    d.values.data(), {d.values.size()}, self));
            },
            "Values (float32, nnz), a read-only view; None for boolean data (every entry 1).")
        .def_prop_ro(
            "weights",
            [](nb::handle self) -> nb::object {
                const Dataset& d = nb::cast<const Dataset&>(self);
                if (!d.is_weighted()) return nb::none();
                return nb::cast(nb::ndarray<nb::numpy, const float, nb::ndim<1>>(
                    d.weights.data(), {d.weights.size()}, self));
            },
            "Per-example weights (float32), a read-only view; None when unweighted.")
        .def("expanded", &Dataset::expanded, "One CSR row per example (indexed data expanded).")
        .def(
            "renamed",
            [](const Dataset& d, const std::string& name) {
                Dataset copy = d;
                copy.name = name;
                return copy;
            },
            nb::arg("name"), "A copy named `name`.");

    m.def(
        "write_datasets",
        [](const std::string& path, const std::vector<const Dataset*>& datasets) {
            std::vector<Dataset> copies;
            for (const Dataset* d : datasets) copies.push_back(*d);
            nb::gil_scoped_release release;
            write_datasets(path, copies);
        },
        nb::arg("path"), nb::arg("datasets"),
        "Writes datasets to one netCDF-4 file (DSSTNE's layout), atomically.");

    m.def(
        "convert_text",
        [](const std::vector<std::string>& paths, const std::string& name,
           const std::string& format, bool analog, std::optional<double> min_rating,
           const std::string& ids, std::optional<std::vector<std::string>> features,
           bool grow_features, bool drop_unknown, std::optional<std::vector<std::string>> samples,
           bool grow_samples) {
            ConvertOptions o;
            o.format = parse_text_format(format);
            o.analog = analog;
            o.min_rating = min_rating;
            o.ids = parse_id_mode(ids);
            o.grow_features = grow_features;
            o.unknown = drop_unknown ? UnknownFeatures::kDrop : UnknownFeatures::kError;
            o.grow_samples = grow_samples;
            LabelIndex feature_index = index_of(features), sample_index = index_of(samples);
            ConvertStats stats;
            Dataset d;
            {
                nb::gil_scoped_release release;
                d = convert_text(expand_input_paths(paths), name, o, sample_index, feature_index,
                                 &stats);
            }
            return nb::make_tuple(std::move(d), labels_of(sample_index), labels_of(feature_index),
                                  stats_dict(stats));
        },
        nb::arg("paths"), nb::arg("name"), nb::arg("format"), nb::arg("analog"),
        nb::arg("min_rating").none(), nb::arg("ids"), nb::arg("features").none(),
        nb::arg("grow_features"), nb::arg("drop_unknown"), nb::arg("samples").none(),
        nb::arg("grow_samples"),
        "convert_text (sparsenet/convert.h): (dataset, sample labels, feature labels, stats).");

    m.def("read_index", &read_index, nb::arg("path"),
          "A DSSTNE index file ('label<TAB>index' lines): labels by index.");
    m.def("write_index", &write_index, nb::arg("path"), nb::arg("labels"),
          "Writes labels as a DSSTNE index file, atomically.");

    m.def(
        "evaluate_ranking",
        [](const nb::ndarray<const uint32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>& ids,
           const nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>& scores,
           const Dataset& heldout, const std::vector<uint32_t>& ks, uint32_t items) {
            const TopK top = top_k_of(ids, scores);
            RankingOptions o;
            o.ks = ks;
            o.items = items;
            RankingReport report;
            {
                nb::gil_scoped_release release;
                report = evaluate_ranking(top, heldout, o);
            }
            return report_dict(report);
        },
        nb::arg("ids"), nb::arg("scores"), nb::arg("heldout"), nb::arg("ks"), nb::arg("items") = 0,
        "evaluate_ranking (sparsenet/metrics.h) as {'recall@20': ...}.");

    m.def("write_recs", &write_recs, nb::arg("path"), nb::arg("ids"), nb::arg("scores"),
          nb::arg("sample_names") = std::vector<std::string>(),
          nb::arg("feature_names") = std::vector<std::string>(),
          "Writes top-K lists in `sparsenet predict`'s recs format.");
}

}  // namespace sparsenet::python
