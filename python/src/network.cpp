// sparsenet._core: Network (create, load, save, parameters), training with `sparsenet train`'s
// options, validation and keep-best, and prediction as `sparsenet predict` does it.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>

#include "common.h"
#include "sparsenet/config.h"
#include "sparsenet/metrics.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"

namespace sparsenet::python {

nb::dict ranking_report_dict(const RankingReport& r);  // dataset.cpp

namespace {

using DatasetMap = std::map<std::string, const Dataset*>;

// A network and what guards it: one call at a time uses it (training, prediction, saving), and
// cancel() reaches the Trainer of a running fit() from any thread.
struct PyNetwork {
    std::unique_ptr<Network> net;
    int threads = 0;
    std::mutex busy;
    std::mutex active_mutex;
    Trainer* active = nullptr;

    Network& get() {
        if (!net) throw Error(ErrorCategory::kUsage, "the network has been closed");
        return *net;
    }
};

nb::list layers_of(const NetworkConfig& c) {
    nb::list out;
    for (const LayerConfig& l : c.layers) {
        nb::dict d;
        d["name"] = l.name;
        d["kind"] = l.kind == LayerKind::kInput    ? "Input"
                    : l.kind == LayerKind::kOutput ? "Output"
                                                   : "Hidden";
        d["dataset"] = l.dataset;
        d["n"] = l.n_auto ? nb::none() : nb::cast(l.n);
        out.append(d);
    }
    return out;
}

nb::dict training_dict(const TrainOptions& o) {
    nb::dict d;
    d["epochs"] = o.epochs;
    d["batch"] = o.batch;
    d["seed"] = o.seed;
    d["optimizer"] = std::string(to_string(o.optimizer.kind));
    d["learning_rate"] = o.optimizer.learning_rate;
    return d;
}

// TrainOptions as `sparsenet train` builds them: the config's, then each given flag.
TrainOptions resolve_options(const NetworkConfig& config, const nb::dict& o) {
    TrainOptions options = train_options(config);
    OptimizerOptions& opt = options.optimizer;
    for (auto [key_obj, value] : o) {
        const std::string key = nb::cast<std::string>(key_obj);
        if (value.is_none()) continue;
        if (key == "epochs")
            options.epochs = nb::cast<uint32_t>(value);
        else if (key == "batch")
            options.batch = nb::cast<uint32_t>(value);
        else if (key == "optimizer")
            opt.kind = optimizer_from_string(nb::cast<std::string>(value));
        else if (key == "sparse_updates")
            opt.sparse_update = sparse_update_from_string(nb::cast<std::string>(value));
        else if (key == "learning_rate")
            opt.learning_rate = nb::cast<float>(value);
        else if (key == "mu")
            opt.mu = nb::cast<float>(value);
        else if (key == "mu1")
            opt.mu1 = nb::cast<float>(value);
        else if (key == "l2")
            opt.l2 = nb::cast<float>(value);
        else if (key == "l1")
            opt.l1 = nb::cast<float>(value);
        else if (key == "epsilon")
            opt.epsilon = nb::cast<float>(value);
        else if (key == "decay")
            options.decay = nb::cast<float>(value);
        else if (key == "seed")
            options.seed = nb::cast<uint64_t>(value);
        else if (key == "shuffle")
            options.shuffle = nb::cast<bool>(value);
        else if (key == "check_finite")
            options.check_finite = nb::cast<bool>(value);
        else
            throw Error(ErrorCategory::kUsage, "fit: unknown option '" + key + "'");
    }
    if (options.batch == 0) throw Error(ErrorCategory::kUsage, "fit: batch must be positive");
    if (!(options.decay.value_or(0.0f) >= 0.0f)) {
        throw Error(ErrorCategory::kUsage, "fit: decay must be >= 0");
    }
    validate(opt);
    return options;
}

// `sparsenet train --validate-input/--validate-target [--keep-best M@K]` (tools/validation.cpp)
// over the public API: after each epoch every item is ranked for the validation rows (their
// input items excluded) and scored against the held-out items.
class Validation {
  public:
    Validation(Network& network, const Dataset& input, const Dataset& target,
               std::vector<uint32_t> ks, std::optional<std::pair<std::string, uint32_t>> keep_best,
               uint32_t batch)
        : network_(network), ks_(std::move(ks)), keep_best_(std::move(keep_best)), batch_(batch) {
        const LayerConfig* input_layer = nullptr;
        std::string output_layer;
        for (const LayerConfig& l : network.config().layers) {
            if (l.kind == LayerKind::kInput) {
                if (input_layer != nullptr) {
                    throw Error(ErrorCategory::kUsage, "validation needs a single-input network");
                }
                input_layer = &l;
            }
            if (output_layer.empty() && l.kind == LayerKind::kOutput) output_layer = l.name;
        }
        if (input_layer == nullptr || output_layer.empty()) {
            throw Error(ErrorCategory::kUsage,
                        "validation: the network needs an Input and an Output layer");
        }
        items_ = network.layer_size(output_layer);
        input_ = input.is_indexed() ? input.expanded() : input;
        input_.name = input_layer->dataset;
        target_ = target.is_indexed() ? target.expanded() : target;
        if (input_.rows != target_.rows) {
            throw Error(ErrorCategory::kData,
                        "validation: the targets have " + std::to_string(target_.rows) +
                            " rows; the inputs have " + std::to_string(input_.rows) +
                            "; expected the same");
        }
        if (input_.cols > items_ || target_.cols > items_) {
            throw Error(ErrorCategory::kData,
                        "validation: " + std::to_string(std::max(input_.cols, target_.cols)) +
                            " columns; output layer '" + output_layer + "' has " +
                            std::to_string(items_) + " units; expected at most that many");
        }
        if (target_.nnz() == 0) {
            throw Error(ErrorCategory::kData,
                        "validation: the targets hold no held-out items; nothing to validate on");
        }
        if (ks_.empty()) ks_.push_back(20);
        if (keep_best_ && std::find(ks_.begin(), ks_.end(), keep_best_->second) == ks_.end()) {
            ks_.push_back(keep_best_->second);
        }
        predictor_ = std::make_unique<Predictor>(network_, DatasetMap{{input_.name, &input_}});
    }

    RankingReport evaluate() {
        PredictOptions po;
        po.k = *std::max_element(ks_.begin(), ks_.end());
        po.batch = batch_;
        const TopK top = predictor_->top_k(po, &input_);
        RankingOptions ro;
        ro.ks = ks_;
        ro.items = items_;
        return evaluate_ranking(top, target_, ro);
    }

    // After an epoch: the report, and whether it is the best so far (then the parameters are
    // kept, as `--keep-best` writes the model file).
    RankingReport on_epoch(uint32_t epoch) {
        RankingReport report = evaluate();
        if (!keep_best_) return report;
        const double value = metric_value(report.at_k(keep_best_->second), keep_best_->first);
        if (best_epoch_ == 0 || value > best_value_) {
            best_epoch_ = epoch;
            best_value_ = value;
            best_.clear();
            for (const Parameter& p : network_.parameters()) {
                best_.emplace_back(p.name, network_.get_parameter(p.name));
            }
        }
        return report;
    }

    void restore_best() {
        for (const auto& [name, values] : best_) network_.set_parameter(name, values);
    }

    uint32_t best_epoch() const { return best_epoch_; }
    double best_value() const { return best_value_; }

  private:
    Network& network_;
    std::vector<uint32_t> ks_;
    std::optional<std::pair<std::string, uint32_t>> keep_best_;
    uint32_t batch_;
    uint32_t items_ = 0;
    Dataset input_, target_;
    std::unique_ptr<Predictor> predictor_;
    uint32_t best_epoch_ = 0;
    double best_value_ = 0.0;
    std::vector<std::pair<std::string, std::vector<float>>> best_;
};

nb::dict epoch_dict(const EpochStats& s) {
    nb::dict d;
    d["epoch"] = s.epoch;
    d["loss"] = s.loss;
    d["examples"] = s.examples;
    d["seconds"] = s.seconds;
    d["examples_per_second"] = s.examples_per_second;
    d["batches"] = s.batches;
    d["complete"] = s.complete;
    return d;
}

struct FitArgs {
    DatasetMap datasets;
    nb::dict options;
    nb::object on_batch, on_epoch, early_stop;
    const Dataset* validation_input = nullptr;
    const Dataset* validation_target = nullptr;
    std::vector<uint32_t> validate_k;
    std::optional<std::pair<std::string, uint32_t>> keep_best;
    uint32_t patience = 0;
};

nb::list fit(PyNetwork& self, FitArgs a) {
    Network& network = self.get();
    TrainOptions options = resolve_options(network.config(), a.options);
    nb::list history;
    std::optional<nb::python_error> failure;  // a callback's exception, raised after fit
    std::unique_ptr<Validation> validation;
    std::unique_ptr<Trainer> trainer;
    uint32_t since_best = 0;
    // Runs Python code from a callback (GIL taken); an exception cancels training.
    auto call = [&](auto&& body) {
        nb::gil_scoped_acquire acquire;
        if (failure) return;
        try {
            body();
        } catch (nb::python_error& e) {
            failure.emplace(std::move(e));
            trainer->cancel();
        }
    };
    options.on_batch = [&](const BatchProgress& p) {
        call([&] {
            if (PyErr_CheckSignals() != 0) throw nb::python_error();  // Ctrl-C
            if (a.on_batch.is_none()) return;
            nb::dict d;
            d["epoch"] = p.epoch;
            d["batch"] = p.batch;
            d["batches"] = p.batches;
            d["examples"] = p.examples;
            d["loss"] = p.loss;
            d["seconds"] = p.seconds;
            a.on_batch(d);
        });
    };
    options.on_epoch = [&](const EpochStats& s) {
        std::optional<RankingReport> report;
        if (validation) report = validation->on_epoch(s.epoch);
        call([&] {
            nb::dict d = epoch_dict(s);
            if (report) d["validation"] = ranking_report_dict(*report);
            history.append(d);
            if (!a.on_epoch.is_none()) a.on_epoch(d);
        });
    };
    options.early_stop = [&](const EpochStats& s) {
        bool stop = false;
        if (validation && a.patience > 0) {
            since_best = validation->best_epoch() == s.epoch ? 0 : since_best + 1;
            stop = since_best >= a.patience;
        }
        if (!a.early_stop.is_none()) {
            call([&] {
                stop = nb::cast<bool>(a.early_stop(history[nb::len(history) - 1])) || stop;
            });
        }
        return stop;
    };
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.busy);
    ThreadScope threads(self.threads);
    if (a.validation_input != nullptr) {
        validation =
            std::make_unique<Validation>(network, *a.validation_input, *a.validation_target,
                                         a.validate_k, a.keep_best, options.batch);
    }
    trainer = std::make_unique<Trainer>(network, a.datasets, options);
    {
        std::lock_guard<std::mutex> active(self.active_mutex);
        self.active = trainer.get();
    }
    struct Clear {
        PyNetwork& self;
        ~Clear() {
            std::lock_guard<std::mutex> active(self.active_mutex);
            self.active = nullptr;
        }
    } clear{self};
    trainer->fit();
    if (validation && validation->best_epoch() > 0) validation->restore_best();
    nb::gil_scoped_acquire acquire;
    if (failure) throw *failure;
    return history;
}

std::pair<nb::ndarray<nb::numpy, uint32_t>, nb::ndarray<nb::numpy, float>> predict(
    PyNetwork& self, const DatasetMap& inputs, uint32_t k, uint32_t batch,
    const std::string& output_layer, const Dataset* exclude, bool exclude_inputs) {
    if (k == 0) throw Error(ErrorCategory::kUsage, "predict: k must be positive");
    if (batch == 0) throw Error(ErrorCategory::kUsage, "predict: batch must be positive");
    TopK top;
    {
        nb::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(self.busy);
        ThreadScope threads(self.threads);
        Network& network = self.get();
        PredictOptions options;
        options.k = k;
        options.batch = batch;
        options.output_layer = output_layer;
        Predictor predictor(network, inputs);
        std::string out_name = output_layer;
        std::vector<const LayerConfig*> input_layers;
        for (const LayerConfig& l : network.config().layers) {
            if (l.kind == LayerKind::kInput) input_layers.push_back(&l);
            if (out_name.empty() && l.kind == LayerKind::kOutput) out_name = l.name;
        }
        const uint32_t out_width = network.layer_size(out_name);
        // As `sparsenet predict`: the row's own input items, unless --keep-input.
        if (exclude_inputs) {
            if (input_layers.size() != 1) {
                throw Error(ErrorCategory::kUsage,
                            "excluding the input items needs a single-input network; pass "
                            "exclude=None or a matrix of the items to exclude");
            }
            const Dataset& in = *inputs.at(input_layers[0]->dataset);
            if (in.cols > out_width) {
                throw Error(ErrorCategory::kUsage,
                            "the input dataset is wider than the output layer, so its items are "
                            "not output items; pass exclude=None or a matrix");
            }
            exclude = &in;
        }
        top = predictor.top_k(options, exclude);
    }
    const size_t rows = top.rows, kk = top.k;
    return {owned_array(std::move(top.indices), {rows, kk}),
            owned_array(std::move(top.scores), {rows, kk})};
}

}  // namespace

void bind_network(nb::module_& m) {
    m.def(
        "parse_config",
        [](const std::string& text, const std::string& source) {
            const NetworkConfig c = NetworkConfig::from_json(text, source);
            return nb::make_tuple(c.to_json(), layers_of(c), training_dict(train_options(c)));
        },
        nb::arg("text"), nb::arg("source") = "<string>",
        "Parses and checks a network config: (canonical JSON, layers, training defaults).");
    m.def(
        "read_config",
        [](const std::string& path) {
            const NetworkConfig c = NetworkConfig::from_file(path);
            return nb::make_tuple(c.to_json(), layers_of(c), training_dict(train_options(c)));
        },
        nb::arg("path"), "parse_config of a file.");

    nb::class_<PyNetwork>(m, "Network", "A sparsenet::Network (config + weights on a backend).")
        .def_static(
            "create",
            [](const std::string& json, const std::string& source,
               const std::map<std::string, uint32_t>& widths, const std::string& device,
               int threads, uint64_t seed, uint32_t batch, const std::string& precision) {
                const NetworkConfig config = NetworkConfig::from_json(json, source);
                auto self = std::make_unique<PyNetwork>();
                self->threads = threads;
                NetworkOptions o;
                o.device = device;
                o.threads = threads;
                o.seed = seed;
                o.batch = batch;
                if (!precision.empty()) o.precision = parse_precision(precision);
                nb::gil_scoped_release release;
                ThreadScope scope(threads);
                self->net = std::make_unique<Network>(Network::create(config, widths, o));
                return self;
            },
            nb::arg("config"), nb::arg("source"), nb::arg("widths"), nb::arg("device"),
            nb::arg("threads"), nb::arg("seed"), nb::arg("batch") = 0, nb::arg("precision") = "")
        .def_static(
            "load",
            [](const std::string& path, const std::string& device, int threads,
               const std::string& precision) {
                auto self = std::make_unique<PyNetwork>();
                self->threads = threads;
                NetworkOptions o;
                o.device = device;
                o.threads = threads;
                if (!precision.empty()) o.precision = parse_precision(precision);
                nb::gil_scoped_release release;
                ThreadScope scope(threads);
                self->net = std::make_unique<Network>(Network::load(path, o));
                return self;
            },
            nb::arg("path"), nb::arg("device"), nb::arg("threads"), nb::arg("precision") = "")
        .def(
            "save",
            [](PyNetwork& self, const std::string& path) {
                nb::gil_scoped_release release;
                std::lock_guard<std::mutex> lock(self.busy);
                self.get().save(path);
            },
            nb::arg("path"))
        .def("config_json", [](PyNetwork& self) { return self.get().config().to_json(); })
        .def("layers", [](PyNetwork& self) { return layers_of(self.get().config()); })
        .def_prop_ro("device", [](PyNetwork& self) { return self.get().device(); })
        // The matrix products' arithmetic ("fp32", "tf32", "bf16"); set between calls.
        .def_prop_rw(
            "precision",
            [](PyNetwork& self) { return std::string(to_string(self.get().precision())); },
            [](PyNetwork& self, const std::string& p) {
                const Precision value = parse_precision(p);
                std::lock_guard<std::mutex> lock(self.busy);
                self.get().set_precision(value);
            })
        .def_ro("threads", &PyNetwork::threads)
        .def("layer_size",
             [](PyNetwork& self, const std::string& l) { return self.get().layer_size(l); })
        .def("parameters",
             [](PyNetwork& self) {
                 std::vector<std::tuple<std::string, uint64_t, uint64_t>> out;
                 for (const Parameter& p : self.get().parameters())
                     out.emplace_back(p.name, p.rows, p.cols);
                 return out;
             })
        .def(
            "get_parameter",
            [](PyNetwork& self, const std::string& name) {
                std::vector<float> values;
                size_t rows = 0, cols = 0;
                {
                    nb::gil_scoped_release release;
                    std::lock_guard<std::mutex> lock(self.busy);
                    for (const Parameter& p : self.get().parameters()) {
                        if (p.name == name) rows = p.rows, cols = p.cols;
                    }
                    values = self.get().get_parameter(name);
                }
                return owned_array(std::move(values), {rows, cols});
            },
            nb::arg("name"))
        .def(
            "set_parameter",
            [](PyNetwork& self, const std::string& name,
               const nb::ndarray<const float, nb::c_contig, nb::device::cpu>& values) {
                std::vector<float> v(values.data(), values.data() + values.size());
                nb::gil_scoped_release release;
                std::lock_guard<std::mutex> lock(self.busy);
                self.get().set_parameter(name, v);
            },
            nb::arg("name"), nb::arg("values"))
        .def(
            "fit",
            [](PyNetwork& self, const DatasetMap& datasets, const nb::dict& options,
               nb::object on_batch, nb::object on_epoch, nb::object early_stop,
               const Dataset* validation_input, const Dataset* validation_target,
               const std::vector<uint32_t>& validate_k,
               std::optional<std::pair<std::string, uint32_t>> keep_best, uint32_t patience) {
                if ((validation_input == nullptr) != (validation_target == nullptr)) {
                    throw Error(ErrorCategory::kUsage,
                                "fit: validation needs both inputs and targets");
                }
                if (validation_input == nullptr && (keep_best || patience > 0)) {
                    throw Error(ErrorCategory::kUsage,
                                "fit: keep_best and patience need validation data");
                }
                if (patience > 0 && !keep_best) {
                    throw Error(ErrorCategory::kUsage,
                                "fit: patience needs keep_best (the metric)");
                }
                FitArgs a{datasets,         options,           on_batch,   on_epoch,  early_stop,
                          validation_input, validation_target, validate_k, keep_best, patience};
                return fit(self, std::move(a));
            },
            nb::arg("datasets"), nb::arg("options"), nb::arg("on_batch").none(),
            nb::arg("on_epoch").none(), nb::arg("early_stop").none(),
            nb::arg("validation_input").none(), nb::arg("validation_target").none(),
            nb::arg("validate_k"), nb::arg("keep_best").none(), nb::arg("patience"))
        .def(
            "cancel",
            [](PyNetwork& self) {
                std::lock_guard<std::mutex> active(self.active_mutex);
                if (self.active == nullptr) return false;
                self.active->cancel();
                return true;
            },
            "Stops a running fit() after the batch in progress; False when none runs.")
        .def("predict", &predict, nb::arg("inputs"), nb::arg("k"), nb::arg("batch"),
             nb::arg("output_layer"), nb::arg("exclude").none(), nb::arg("exclude_inputs"))
        .def(
            "scores",
            [](PyNetwork& self, const DatasetMap& inputs, const std::string& output_layer) {
                std::vector<float> values;
                size_t rows = 0, cols = 0;
                {
                    nb::gil_scoped_release release;
                    std::lock_guard<std::mutex> lock(self.busy);
                    ThreadScope threads(self.threads);
                    Predictor predictor(self.get(), inputs);
                    rows = predictor.rows();
                    if (rows > UINT32_MAX) {
                        throw Error(ErrorCategory::kUsage, "scores: at most 2^32-1 rows a call");
                    }
                    values = predictor.scores(0, uint32_t(rows), output_layer);
                    cols = rows == 0 ? 0 : values.size() / rows;
                }
                return owned_array(std::move(values), {rows, cols});
            },
            nb::arg("inputs"), nb::arg("output_layer"))
        .def("close", [](PyNetwork& self) {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(self.busy);
            self.net.reset();
        });
}

}  // namespace sparsenet::python
