// The network's pass buffers: what one forward and backward pass over a batch writes (the
// activations, deltas and gradients). Private to the network: only network_impl.h includes it.
//
// Grown with the batch by Network::Impl::ensure_batch_capacity (activations, deltas) and
// ensure_sparse_capacity (row-sparse gradients); a dense gradient is allocated by its first
// write (Network::Impl::dense_gradient; never where the step is fused), the bias gradients with the
// parameters (allocate_parameters). Written by forward, backward and zero_gradients; nothing in
// them outlives a batch except their size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace sparsenet::engine {

// Layer l's buffers (PassBuffers::layers[l]; empty for input layers).
struct LayerBuffers {
    // [batch, n_local] row-major (ld n_local) in buffers of batch_capacity * cap floats, so that
    // a collective may send cap columns per row: activations and dL/dA, then dL/dZ.
    // An output layer whose delta is written over its activations (LayerBand::delta_over_act)
    // has no delta buffer: its delta is in act once backward formed it.
    DeviceArray<float> act;
    DeviceArray<float> delta;
    // Precision::kBf16 (issue 46): BF16 copies of act and of the delta, laid out like them (the
    // same ld, zeros in the padding), written by the ops that produce the FP32 values in the
    // same pass (Backend's out_bf16) and read in place by the GEMMs (ConstMatrixView::bf16).
    // Allocated only where a GEMM reads the buffer and its last writer before that GEMM is the
    // producer (Network::Impl::keeps_act_bf16 / keeps_delta_bf16); empty otherwise, and the
    // GEMM converts the FP32 values as before. Either exists only with its FP32 buffer's
    // capacity, and every op that writes the FP32 values of a buffer with a copy writes the copy.
    DeviceArray<uint16_t> act_bf16;
    DeviceArray<uint16_t> delta_bf16;
    DeviceArray<float> bias_grad;  // [n_local]
    // Output layers: [batch] the norm of each row of the activations, written by backward's
    // output_delta / output_epilogue and read by the finite-value guard (Training::record_health)
    // instead of a pass over [batch, n_local].
    DeviceArray<float> act_norms;
    // Split networks, a layer with a matrix split by input rows into it: the layer's whole delta
    // [batch, n] (ld n), gathered once in backward for those matrices' weight gradients, and
    // kept until update() (a deferred gradient's GEMM or sparse step reads it).
    DeviceArray<float> delta_all;
};

// Edge e's buffers (PassBuffers::edges[e]). The dense gradient lives on the owner of a shared
// matrix and sums every use of it; the row-sparse one is the edge's own.
struct EdgeBuffers {
    bool grad_ready = false;  // owners: backward wrote the gradient of the current batch
    // Owners: backward left the dense weight-gradient GEMM of the current batch (this many rows)
    // to update(), which runs it with the optimizer step inside (Network::Impl::
    // defer_dense_grads); 0: none pending. Its operands stay in the pass buffers until the next
    // forward: the source's activations (split by output columns: `gathered`, every rank's) and
    // the destination's delta (split by input rows: the layer's `delta_all`).
    size_t deferred_rows = 0;
    // Owners with a row-sparse gradient: backward left csr_weight_grad to update(), which runs
    // it with the step inside (Backend::sparse_step) where the step visits the touched rows only,
    // else writes it first (Network::Impl::materialize_gradient). Its operands: the batch's
    // input rows and noise here, the destination's delta in the layer's buffers.
    bool sparse_deferred = false;
    CsrBatchView deferred_x;
    SparseNoise deferred_noise;
    DeviceArray<float> grad;  // dense gradient [local_rows, local_cols] (owners with dense_grad)
    // kByOutput: the source activations of the current batch gathered from every rank,
    // [batch, rows] (forward fills it; backward's weight gradient reads it).
    mutable DeviceArray<float> gathered;
    // Row-sparse gradient of this edge (sparse sources): [capacity, local_cols] + local row ids
    // + count. For a shared matrix it is scattered into the owner's dense gradient.
    DeviceArray<float> sparse_values;
    DeviceArray<uint32_t> sparse_rows;
    DeviceArray<uint32_t> sparse_count;
    size_t sparse_capacity = 0;
    // local_cols: the edge's (ParallelPlan::edges).
    SparseRowGrad sparse_grad(uint32_t local_cols) {
        return {sparse_rows.data(), sparse_count.data(), sparse_values.data(), sparse_capacity,
                local_cols};
    }
};

struct PassBuffers {
    std::vector<LayerBuffers> layers;  // by layer index
    std::vector<EdgeBuffers> edges;    // by edge index
    size_t batch_capacity = 0;         // rows the activation and delta buffers hold
    size_t sparse_nnz_capacity = 0;    // per-batch nonzero capacity of the sparse gradients
    // Data parallelism: the whole batch's size, which scales the gradients of a rank's share
    // (0: the rows passed to backward are the whole batch).
    size_t loss_batch = 0;
    // Set around a training step's backward (Training::compute_batch_gradients): the dense
    // weight gradient of a matrix with one use and a dense source (split or not) is not written by
    // backward but computed by update() inside the optimizer step (SGD: the GEMM's C is the
    // weights; Momentum: the velocity), or written on demand (materialize_gradients) by every
    // other reader of the gradient. The row-sparse gradient of a sparse input with one use is
    // deferred likewise (defer_sparse_grads, EdgeBuffers::sparse_deferred).
    bool defer_dense_grads = false;
    bool defer_sparse_grads = false;
    // Set around a training step (Training::compute_batch_gradients): forward leaves the output
    // layers' z + bias and activation to backward, which runs them with the delta and the loss
    // in one pass per row (Backend::output_epilogue); output_activation_pending says forward
    // did (until backward has run).
    bool fuse_output_epilogue = false;
    bool output_activation_pending = false;
};

}  // namespace sparsenet::engine
