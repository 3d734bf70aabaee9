// A CSR dataset resident in backend memory (uploaded once per run).
#pragma once

#include "backend/backend.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet::engine {

class DeviceDataset {
  public:
    // `data` holds one row per example: callers pass Dataset::expanded() of indexed data.
    DeviceDataset(Backend& backend, const Dataset& data)
        : rows_(checked_rows(data)),
          cols_(data.cols),
          offsets_(backend, data.offsets.size(), "dataset offsets"),
          indices_(backend, data.indices.size(), "dataset indices"),
          values_(backend, data.values.size(), "dataset values"),
          weights_(backend, data.weights.size(), "dataset example weights"),
          ignore_zero_(data.sparse_ignore_zero) {
        offsets_.upload(data.offsets.data(), data.offsets.size());
        if (!data.indices.empty()) indices_.upload(data.indices.data(), data.indices.size());
        if (!data.values.empty()) values_.upload(data.values.data(), data.values.size());
        if (!data.weights.empty()) weights_.upload(data.weights.data(), data.weights.size());
    }

    uint64_t rows() const { return rows_; }
    uint32_t cols() const { return cols_; }
    // DSSTNE's SparseIgnoreZero: as targets, only the stored entries count.
    bool ignore_zero() const { return ignore_zero_; }

    CsrBatchView view(const BatchRows& batch) const {
        CsrBatchView v;
        v.offsets = offsets_.data();
        v.indices = indices_.data();
        v.values = values_.size() > 0 ? values_.data() : nullptr;
        v.weights = weights_.size() > 0 ? weights_.data() : nullptr;
        v.batch = batch;
        v.cols = cols_;
        v.col_offset = 0;
        return v;
    }

  private:
    static uint64_t checked_rows(const Dataset& data) {
        if (data.is_indexed()) {
            throw Error(ErrorCategory::kInternal,
                        "dataset '" + data.name + "' is indexed; upload its expanded() copy");
        }
        return data.rows;
    }

    uint64_t rows_;
    uint32_t cols_;
    DeviceArray<uint64_t> offsets_;
    DeviceArray<uint32_t> indices_;
    DeviceArray<float> values_;
    DeviceArray<float> weights_;  // [rows] per-example weights, or empty (unweighted)
    bool ignore_zero_;
};

}  // namespace sparsenet::engine
