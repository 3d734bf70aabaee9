// The network's parallel plan: which ranks run it, in which mode, and which part of every layer
// and matrix this rank holds. Private to the network: only network_impl.h includes it.
//
// Written by Network::Impl::plan_parallel (from build(), and describe_model_parallel through
// plan_split); const afterwards, except for the collective scratch, which
// ensure_batch_capacity grows with the batch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"

namespace sparsenet::engine {

// Model parallelism (docs/parallelism.md): with P ranks every layer's units are split into P
// contiguous bands, rank r holding units [n * r / P, n * (r + 1) / P). Every per-unit buffer of a
// layer (activations, deltas, bias) holds this rank's band only.
struct Band {
    uint32_t offset = 0;  // first unit
    uint32_t count = 0;   // units
};
Band band_of(uint32_t n, int ranks, int rank);

// How one weight matrix W [rows = source units, cols = destination units] is split (owners):
// kNone with one rank; otherwise the split that moves only the smaller side (DSSTNE's rule):
//  - kByOutput (rows <= cols, dense source): this rank holds W[:, its destination band]. Forward
//    all-gathers the source activations [B, rows]; backward reduce-scatters the partial source
//    delta [B, rows]. The weight gradient is local.
//  - kByInput (rows > cols, or a sparse Input source): this rank holds W[its source band, :].
//    Forward reduce-scatters the partial z [B, cols]; backward all-gathers the destination delta
//    [B, cols]. The weight gradient and the source delta band are local.
enum class Split { kNone, kByOutput, kByInput };
const char* to_string(Split split);

// Layer l's band on this rank (ParallelPlan::layers[l]).
struct LayerBand {
    // This rank's units [offset, offset + n_local) (all of them with one rank); cap is the
    // largest band of any rank: collectives move blocks of cap columns per rank.
    uint32_t offset = 0;
    uint32_t n_local = 0;
    uint32_t cap = 0;
    // The row stride of the layer's activation and delta buffers: padded_ld(n_local), split or
    // not. Collectives move packed rows of n_local floats (Network::Impl::gather_columns and
    // reduce_scatter_columns repack where ld > n_local).
    uint32_t ld = 0;
    // Split networks: the row stride of the layer's whole rows gathered on this rank
    // (padded_ld(n)): the partial rows of a reduce-scatter (ParallelPlan::full_partial), a
    // source's gathered activations (EdgeBuffers::gathered), a gathered delta
    // (LayerBuffers::delta_all), all GEMM operands.
    uint32_t whole_ld = 0;
    // The layer's delta is written over its activations (Network::Impl::delta_over_activation):
    // no delta buffer; an output layer whose activations nothing reads once its delta is formed.
    bool delta_over_act = false;
};

// Edge e's part of its matrix on this rank (ParallelPlan::edges[e]).
struct EdgeSplit {
    Split split = Split::kNone;  // owners: how the matrix is split across ranks
    // Owners: this rank's block W[row_offset .. + local_rows, col_offset .. + local_cols), stored
    // row-major [local_rows, local_cols] in w, state1/2, grad (the whole matrix with one rank).
    uint32_t local_rows = 0;
    uint32_t local_cols = 0;
    uint32_t row_offset = 0;
    uint32_t col_offset = 0;
    // Owners: the row stride of w, state1/2 and grad: padded_ld(local_cols), split or not.
    // Model files, save chunks, parameters and gradients handed out are packed [rows, cols].
    uint32_t ld = 0;
    // Owners: the gradient is dense ([rows, cols] in grad) unless the only use is a sparse
    // source, which keeps the row-sparse gradient (PassBuffers) instead.
    bool dense_grad = true;
    size_t elements() const { return size_t(local_rows) * ld; }  // floats of w (and each slot)
};

// The row stride of a matrix `cols` wide: cols rounded up to a multiple of kPadFloats (64
// bytes). cuBLAS picks its TF32 kernels by the alignment of the leading dimensions: with
// ld = 27,278 (dsstne-bench's output layer, 8-byte rows) the H100 ran `align1` kernels at 68-87
// TFLOP/s, a third of the step (benchmarks/results/gpu/2026-11-25-h100-c-profile-dsstne-bench.txt).
// OpenBLAS gains nothing measurable from it on the CPU (27,280 against 27,278:
// benchmarks/results/2026-11-26-vm-dsstne-bench-op-times.txt), and costs at most 15 floats
// per row; both backends pad, so the CPU tests run the padded layout the GPU runs. A split
// network pads its blocks and bands the same way (padded_ld of the local width): what crosses
// ranks (collectives, save chunks) is repacked.
// pad false (StepSwitches::padded_ld, SPARSENET_PADDED_LD=0) keeps ld == cols, to compare.
constexpr uint32_t kPadFloats = 16;
uint32_t padded_ld(uint32_t cols, bool pad);

struct ParallelPlan {
    // The ranks that split every layer (a local communicator with one rank).
    std::shared_ptr<Communicator> comm;
    // Model parallelism: this rank and the number of ranks that split every layer (1 when the
    // network is not split, data parallelism included).
    int rank = 0;
    int ranks = 1;
    // The communicator's rank and size, whatever the mode. Data parallelism: every rank holds the
    // whole network, trains on its share of each batch and the gradients are summed.
    int job_rank = 0;
    int job_ranks = 1;
    bool data_parallel = false;
    std::vector<LayerBand> layers;  // by layer index
    std::vector<EdgeSplit> edges;   // by edge index
    // Split networks only: scratch of the collectives, [batch_capacity * padded_ld(moving_side
    // units)] (partial rows to reduce, row stride LayerBand::whole_ld), packed blocks
    // [ranks * batch_capacity * moving_side cap], one packed band [batch_capacity * moving_side
    // cap] (a band repacked to send, or received), and two [batch_capacity] row statistics. (A
    // layer's whole delta gathered in backward has its own buffer, LayerBuffers::delta_all: a
    // deferred weight gradient reads it in update().) Mutable: the const forward uses them, which
    // is why a split network's forward is never run concurrently (the Recommender refuses it).
    mutable DeviceArray<float> full_partial, comm_blocks, comm_local;
    mutable DeviceArray<float> row_stat;

    bool split() const { return ranks > 1; }
};

}  // namespace sparsenet::engine
