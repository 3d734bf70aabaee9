// sparsenet._core: Recommender (serving), every call made without the GIL so that Python threads
// query it in parallel.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/config.h"
#include "sparsenet/recommender.h"

namespace sparsenet::python {
namespace {

// An item of a query or list: a str (a name of the features index), an int (an id), or a
// (str | int, weight) pair.
ItemRef item_of(nb::handle h) {
    if (nb::isinstance<nb::tuple>(h) && nb::len(h) == 2) {
        nb::handle first = h[0];
        const float w = nb::cast<float>(h[1]);
        if (nb::isinstance<nb::str>(first)) return ItemRef(nb::cast<std::string>(first), w);
        return ItemRef(nb::cast<int64_t>(first), w);
    }
    if (nb::isinstance<nb::str>(h)) return ItemRef(nb::cast<std::string>(h));
    if (nb::isinstance<nb::bool_>(h) || !nb::isinstance<nb::int_>(nb::int_(h))) {
        throw Error(ErrorCategory::kUsage, "an item is a str, an int or a (item, weight) pair");
    }
    return ItemRef(nb::cast<int64_t>(nb::int_(h)));
}

std::vector<ItemRef> items_of(nb::handle list) {
    std::vector<ItemRef> out;
    if (list.is_none()) return out;
    if (nb::isinstance<nb::dict>(list)) {  // {item: weight}
        for (auto [k, v] : nb::borrow<nb::dict>(list)) {
            out.push_back(item_of(nb::make_tuple(k, v)));
        }
        return out;
    }
    for (nb::handle h : list) out.push_back(item_of(h));
    return out;
}

RecommendOptions options_of(uint32_t k, bool exclude_inputs, nb::handle allow, nb::handle deny,
                            bool ignore_unknown) {
    RecommendOptions o;
    o.k = k;
    o.exclude_inputs = exclude_inputs;
    o.allow = items_of(allow);
    o.deny = items_of(deny);
    o.ignore_unknown = ignore_unknown;
    return o;
}

// (ids uint32 array, scores float32 array, names, unknown, logits)
nb::tuple result_of(Recommendations&& r) {
    std::vector<uint32_t> ids;
    std::vector<float> scores;
    std::vector<std::string> names;
    for (Recommendation& item : r.items) {
        ids.push_back(item.id);
        scores.push_back(item.score);
        names.push_back(std::move(item.name));
    }
    const size_t n = ids.size();
    return nb::make_tuple(owned_array(std::move(ids), {n}), owned_array(std::move(scores), {n}),
                          std::move(names), std::move(r.unknown), r.logits);
}

}  // namespace

void bind_recommender(nb::module_& m) {
    nb::class_<Recommender>(m, "Recommender", "sparsenet::Recommender: thread-safe serving.")
        .def(
            "__init__",
            [](Recommender* self, const std::string& path, const std::string& features_index,
               const std::string& device, const std::string& output_layer, int threads_per_call,
               int max_concurrent_calls, uint32_t max_batch, bool fp16_screening,
               const std::string& ann_index, uint32_t ann_probe, uint32_t ann_fetch,
               const std::string& precision, bool bf16_weights_only, bool bf16_input_weights) {
                RecommenderOptions o;
                o.features_index = features_index;
                o.device = device;
                o.output_layer = output_layer;
                o.threads_per_call = threads_per_call;
                o.max_concurrent_calls = max_concurrent_calls;
                o.max_batch = max_batch;
                o.fp16_screening = fp16_screening;
                o.ann_index = ann_index;
                o.ann_probe = ann_probe;
                o.ann_fetch = ann_fetch;
                // "": the model file's $.Training.Precision, else the device's default.
                if (!precision.empty()) o.precision = parse_precision(precision);
                o.bf16_weights_only = bf16_weights_only;
                o.bf16_input_weights = bf16_input_weights;
                nb::gil_scoped_release release;
                new (self) Recommender(path, o);
            },
            nb::arg("path"), nb::arg("features_index"), nb::arg("device"), nb::arg("output_layer"),
            nb::arg("threads_per_call"), nb::arg("max_concurrent_calls"), nb::arg("max_batch"),
            nb::arg("fp16_screening"), nb::arg("ann_index"), nb::arg("ann_probe"),
            nb::arg("ann_fetch"), nb::arg("precision") = "", nb::arg("bf16_weights_only") = false,
            nb::arg("bf16_input_weights") = false)
        .def(
            "recommend",
            [](const Recommender& self, nb::handle items, uint32_t k, bool exclude_inputs,
               nb::handle allow, nb::handle deny, bool ignore_unknown) {
                const std::vector<ItemRef> query = items_of(items);
                const RecommendOptions o =
                    options_of(k, exclude_inputs, allow, deny, ignore_unknown);
                Recommendations r;
                {
                    nb::gil_scoped_release release;
                    r = self.recommend(query, o);
                }
                return result_of(std::move(r));
            },
            nb::arg("items"), nb::arg("k"), nb::arg("exclude_inputs"), nb::arg("allow").none(),
            nb::arg("deny").none(), nb::arg("ignore_unknown"))
        .def(
            "recommend_batch",
            [](const Recommender& self, nb::handle queries, uint32_t k, bool exclude_inputs,
               nb::handle allow, nb::handle deny, bool ignore_unknown) {
                const RecommendOptions o =
                    options_of(k, exclude_inputs, allow, deny, ignore_unknown);
                std::vector<Query> qs;
                for (nb::handle q : queries) qs.push_back(Query{items_of(q), o});
                std::vector<Recommendations> rs;
                {
                    nb::gil_scoped_release release;
                    rs = self.recommend_batch(qs);
                }
                nb::list out;
                for (Recommendations& r : rs) out.append(result_of(std::move(r)));
                return out;
            },
            nb::arg("queries"), nb::arg("k"), nb::arg("exclude_inputs"), nb::arg("allow").none(),
            nb::arg("deny").none(), nb::arg("ignore_unknown"))
        .def_prop_ro("input_items", &Recommender::input_items)
        .def_prop_ro("output_items", &Recommender::output_items)
        .def_prop_ro("has_names", &Recommender::has_names)
        .def_prop_ro("screening", &Recommender::screening)
        .def_prop_ro("ann", &Recommender::ann)
        .def_prop_ro("ann_queries", &Recommender::ann_queries)
        .def_prop_ro("ann_fallbacks", &Recommender::ann_fallbacks)
        .def_prop_ro("ann_memory_bytes", &Recommender::ann_memory_bytes)
        .def_prop_ro("released_bytes", &Recommender::released_bytes)
        .def("id_of", &Recommender::id_of, nb::arg("name"))
        .def("name_of", &Recommender::name_of, nb::arg("id"));
}

void bind_ann_index(nb::module_& m) {
    m.def("ann_index_available", &ann_index_available, nb::arg("kind") = "ivf");
    m.def(
        "build_ann_index",
        [](const std::string& model, const std::string& out, const std::string& kind,
           uint32_t hnsw_m, uint32_t ef_construction, uint32_t probe, int threads,
           const std::string& output_layer, const std::string& vectors, uint32_t cells) {
            AnnIndexOptions o;
            o.kind = kind;
            o.cells = cells;
            o.vectors = vectors;
            o.hnsw_m = hnsw_m;
            o.ef_construction = ef_construction;
            o.probe = probe;
            o.threads = threads;
            o.output_layer = output_layer;
            AnnIndexReport r;
            {
                nb::gil_scoped_release release;
                r = build_ann_index(model, out, o);
            }
            nb::dict d;
            d["kind"] = r.kind;
            d["items"] = r.items;
            d["width"] = r.width;
            d["links"] = r.links;
            d["cells"] = r.cells;
            d["probe"] = r.probe;
            d["vectors"] = r.vectors;
            d["seconds"] = r.seconds;
            d["file_bytes"] = r.file_bytes;
            d["index_bytes"] = r.index_bytes;
            d["fingerprint"] = r.fingerprint;
            return d;
        },
        nb::arg("model"), nb::arg("out"), nb::arg("kind"), nb::arg("hnsw_m"),
        nb::arg("ef_construction"), nb::arg("probe"), nb::arg("threads"), nb::arg("output_layer"),
        nb::arg("vectors"), nb::arg("cells"));
}

}  // namespace sparsenet::python
