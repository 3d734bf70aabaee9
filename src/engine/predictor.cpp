// Predictor: inference-mode forward passes and per-row top-K with exclusion.
#include "sparsenet/predictor.h"

#include <algorithm>
#include <chrono>

#include "engine/network_bindings.h"
#include "engine/network_scoring.h"
#include "sparsenet/error.h"

namespace sparsenet {

struct Predictor::Impl {
    engine::Scoring net;
    engine::BoundData data;

    Impl(Network& network, const std::map<std::string, const Dataset*>& inputs)
        : net(network), data(network.impl(), inputs, /*with_outputs=*/false) {}

    void forward(uint64_t first_row, size_t count, bool defer_output_activation = false) {
        if (first_row + count > data.rows()) {
            throw Error(ErrorCategory::kUsage, "rows out of range");
        }
        net.forward(data.bindings(), BatchRows{nullptr, first_row, count}, defer_output_activation);
    }
};

Predictor::Predictor(Network& network, const std::map<std::string, const Dataset*>& inputs)
    : impl_(std::make_unique<Impl>(network, inputs)) {}

Predictor::~Predictor() = default;

uint64_t Predictor::rows() const {
    return impl_->data.rows();
}

std::vector<float> Predictor::scores(uint64_t first_row, uint32_t count,
                                     const std::string& output_layer) {
    const int l = impl_->net.layer(output_layer);
    impl_->forward(first_row, count);
    return impl_->net.scores(l, count);
}

TopK Predictor::top_k(const PredictOptions& options, const Dataset* exclude) {
    Impl& p = *impl_;
    const int l = p.net.layer(options.output_layer);
    const engine::LayerUnits layer = p.net.units(l);
    if (options.k == 0) throw Error(ErrorCategory::kUsage, "k must be positive");
    if (options.batch == 0) throw Error(ErrorCategory::kUsage, "batch size must be positive");
    std::unique_ptr<engine::DeviceDataset> uploaded_exclude;
    // The row's own inputs (predict's default exclusion) are on the device already: uploading
    // them again doubled the input's upload of the ML-20M shape.
    const engine::DeviceDataset* excluded =
        exclude != nullptr && !p.net.split() ? p.data.uploaded(exclude) : nullptr;
    Dataset expanded_exclude;
    if (exclude != nullptr && excluded == nullptr && exclude->is_indexed()) {
        expanded_exclude = exclude->expanded();
        exclude = &expanded_exclude;
    }
    if (exclude != nullptr) {
        if (exclude->examples() != p.data.rows()) {
            throw Error(ErrorCategory::kData, "the exclusion dataset '" + exclude->name + "' has " +
                                                  std::to_string(exclude->examples()) +
                                                  " rows; the inputs have " +
                                                  std::to_string(p.data.rows()));
        }
        if (exclude->cols > layer.n) {
            throw Error(ErrorCategory::kData, "the exclusion dataset '" + exclude->name + "' has " +
                                                  std::to_string(exclude->cols) +
                                                  " columns; layer '" + layer.name + "' has " +
                                                  std::to_string(layer.n) + " units");
        }
        if (excluded == nullptr && p.net.split()) {  // this rank's columns, as its band of scores
            const uint32_t first = std::min(layer.offset, exclude->cols);
            const uint32_t last = std::min(layer.offset + layer.n_local, exclude->cols);
            uploaded_exclude = std::make_unique<engine::DeviceDataset>(
                p.net.backend(), column_band(*exclude, first, last), first);
        } else if (excluded == nullptr) {
            uploaded_exclude = std::make_unique<engine::DeviceDataset>(p.net.backend(), *exclude);
        }
        if (uploaded_exclude) excluded = uploaded_exclude.get();
    }
    TopK result;
    result.rows = p.data.rows();
    result.k = options.k;
    result.scores.resize(result.rows * options.k);
    result.indices.resize(result.rows * options.k);
    const size_t step = std::min<uint64_t>(options.batch, std::max<uint64_t>(1, result.rows));
    // The output activation inside the selection where it can be (Scoring::fuses_activation):
    // the scores are the same bits and the separate activation pass over [batch, n] is not run.
    const bool fused = p.net.fuses_activation(l);
    for (uint64_t first = 0; first < result.rows; first += step) {
        const size_t count = std::min<uint64_t>(step, result.rows - first);
        using Clock = std::chrono::steady_clock;
        const Clock::time_point t0 = Clock::now();
        p.forward(first, count, fused);
        Clock::time_point t1;
        if (options.timings != nullptr) {
            p.net.backend().synchronize();
            t1 = Clock::now();
            options.timings->score += std::chrono::duration<double>(t1 - t0).count();
        }
        CsrBatchView ex;
        if (excluded) ex = excluded->view(BatchRows{nullptr, first, count});
        p.net.top_k(l, count, excluded ? &ex : nullptr, options.k,
                    result.scores.data() + first * options.k,
                    result.indices.data() + first * options.k, fused);
        if (options.timings != nullptr) {
            options.timings->top_k += std::chrono::duration<double>(Clock::now() - t1).count();
        }
    }
    return result;
}

}  // namespace sparsenet
