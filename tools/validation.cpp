#include "validation.h"

#include <algorithm>

#include "common.h"
#include "sparsenet/error.h"
#include "sparsenet/metrics.h"

namespace sparsenet::cli {

Validation::Validation(Network& network, ValidationOptions options)
    : network_(network), options_(std::move(options)) {
    const LayerConfig* input_layer = nullptr;
    std::string output_layer;
    for (const LayerConfig& l : network.config().layers) {
        if (l.kind == LayerKind::kInput) {
            if (input_layer != nullptr) {
                throw Error(ErrorCategory::kUsage,
                            "option --validate-input: validation needs a single-input network");
            }
            input_layer = &l;
        }
        if (output_layer.empty() && l.kind == LayerKind::kOutput) output_layer = l.name;
    }
    if (input_layer == nullptr || output_layer.empty()) {
        throw Error(ErrorCategory::kUsage,
                    "option --validate-input: the network needs an Input and an Output layer");
    }
    items_ = network.layer_size(output_layer);
    // The Input layer's dataset by name, else the file's only dataset (as predict does).
    auto datasets = load_datasets({options_.input_path});
    if (datasets.count(input_layer->dataset)) {
        input_ = std::move(datasets.at(input_layer->dataset));
    } else if (datasets.size() == 1) {
        input_ = std::move(datasets.begin()->second);
    } else {
        throw Error(ErrorCategory::kData, options_.input_path + ": has no dataset '" +
                                              input_layer->dataset + "' for input layer '" +
                                              input_layer->name + "'");
    }
    input_.name = input_layer->dataset;
    if (input_.is_indexed()) input_ = input_.expanded();
    target_ = Dataset::read(options_.target_path);
    if (target_.is_indexed()) target_ = target_.expanded();
    if (input_.rows != target_.rows) {
        throw Error(ErrorCategory::kData,
                    options_.target_path + ": has " + std::to_string(target_.rows) + " rows; " +
                        options_.input_path + " has " + std::to_string(input_.rows) +
                        "; expected the same validation rows");
    }
    // The input items are excluded from the ranking, so they must be output items.
    if (input_.cols > items_ || target_.cols > items_) {
        throw Error(ErrorCategory::kData,
                    (input_.cols > items_ ? options_.input_path : options_.target_path) + ": has " +
                        std::to_string(std::max(input_.cols, target_.cols)) +
                        " columns; output layer '" + output_layer + "' has " +
                        std::to_string(items_) + " units; expected at most that many");
    }
    if (target_.nnz() == 0) {
        throw Error(ErrorCategory::kData,
                    options_.target_path + ": has no held-out items; nothing to validate on");
    }
    if (options_.keep_best && std::find(options_.ks.begin(), options_.ks.end(),
                                        options_.keep_best->k) == options_.ks.end()) {
        options_.ks.push_back(options_.keep_best->k);
    }
    predictor_ = std::make_unique<Predictor>(
        network_, std::map<std::string, const Dataset*>{{input_.name, &input_}});
}

Validation::~Validation() = default;

void Validation::on_epoch(const EpochStats& stats, std::string* note, std::string* json_fields) {
    PredictOptions po;
    po.k = *std::max_element(options_.ks.begin(), options_.ks.end());
    po.batch = options_.batch;
    const TopK top = predictor_->top_k(po, &input_);
    RankingOptions ro;
    ro.ks = options_.ks;
    ro.items = items_;
    const RankingReport report = evaluate_ranking(top, target_, ro);
    *note = "validation " + metrics_line(report);
    *json_fields = ", \"validation\": " + json_text(metrics_json(report), true);
    if (!options_.keep_best) return;
    const MetricSpec& spec = *options_.keep_best;
    const double value = metric_value(report.at_k(spec.k), spec.name);
    if (best_epoch_ == 0 || value > best_value_) {
        // Network::save writes a temporary file and renames it over the model path, so the
        // file on disk is always a complete model of some epoch.
        network_.save(options_.model_path);
        best_epoch_ = stats.epoch;
        best_value_ = value;
        *note += "  best " + spec.name + "@" + std::to_string(spec.k) + " so far: saved";
    }
}

}  // namespace sparsenet::cli
