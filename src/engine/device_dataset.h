// A CSR dataset resident in backend memory (uploaded once per run).
#pragma once

#include "backend/backend.h"
#include "sparsenet/dataset.h"

namespace sparsenet::engine {

class DeviceDataset {
  public:
    DeviceDataset(Backend& backend, const Dataset& data)
        : rows_(data.rows),
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
    uint64_t rows_;
    uint32_t cols_;
    DeviceArray<uint64_t> offsets_;
    DeviceArray<uint32_t> indices_;
    DeviceArray<float> values_;
};

}  // namespace sparsenet::engine
