// A CSR dataset resident in backend memory (uploaded once per run).
#pragma once

#include <vector>

#include "backend/backend.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet::engine {

class DeviceDataset {
  public:
    // `data` holds one row per example: callers pass Dataset::expanded() of indexed data.
    // A column band of a split layer (model parallelism): `data` holds the band with local
    // column ids, col_offset is the band's first global column, and row_totals (empty, or one per
    // row) the sums of the whole rows' values (CsrBatchView::row_totals).
    DeviceDataset(Backend& backend, const Dataset& data, uint32_t col_offset = 0,
                  const std::vector<float>& row_totals = {})
        : rows_(checked_rows(data)),
          cols_(data.cols),
          offsets_(backend, data.offsets.size(), "dataset offsets"),
          indices_(backend, data.indices.size(), "dataset indices"),
          values_(backend, data.values.size(), "dataset values"),
          weights_(backend, data.weights.size(), "dataset example weights"),
          row_totals_(backend, row_totals.size(), "dataset row totals"),
          ignore_zero_(data.sparse_ignore_zero),
          col_offset_(col_offset) {
        if (!row_totals.empty()) row_totals_.upload(row_totals.data(), row_totals.size());
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
        v.row_totals = row_totals_.size() > 0 ? row_totals_.data() : nullptr;
        v.cols = cols_;
        v.col_offset = col_offset_;
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
    DeviceArray<float> weights_;     // [rows] per-example weights, or empty (unweighted)
    DeviceArray<float> row_totals_;  // [rows] whole-row value sums of a band, or empty
    bool ignore_zero_;
    uint32_t col_offset_;
};

}  // namespace sparsenet::engine
