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
          values_(backend, data.values.size(), "dataset values") {
        offsets_.upload(data.offsets.data(), data.offsets.size());
        if (!data.indices.empty()) indices_.upload(data.indices.data(), data.indices.size());
        if (!data.values.empty()) values_.upload(data.values.data(), data.values.size());
    }

    uint64_t rows() const { return rows_; }
    uint32_t cols() const { return cols_; }

    CsrBatchView view(const BatchRows& batch) const {
        CsrBatchView v;
        v.offsets = offsets_.data();
        v.indices = indices_.data();
        v.values = values_.size() > 0 ? values_.data() : nullptr;
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
};

}  // namespace sparsenet::engine
