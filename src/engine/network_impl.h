// The engine's view of a network on one backend, in four parts with one owner each: the graph
// (network_graph.h: built once, then const), the parallel plan (network_plan.h: planned once),
// the parameters (network_parameters.h: what a model file holds) and the pass buffers
// (network_buffers.h: grown per batch). Private to the network*.cpp files.
// Backend-agnostic: every computation is a named op of backend.h.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "engine/device_dataset.h"
#include "engine/network_bindings.h"
#include "engine/network_buffers.h"
#include "engine/network_graph.h"
#include "engine/network_parameters.h"
#include "engine/network_plan.h"
#include "io/model_file.h"
#include "sparsenet/network.h"

namespace sparsenet {

struct Network::Impl {
    NetworkOptions options;
    std::unique_ptr<Backend> backend;
    // Layers, edges, order, feature names: written by build() only, then read.
    engine::Graph graph;
    // Who runs which part: ranks, mode, bands and splits, collective scratch.
    engine::ParallelPlan plan;
    // The weights, biases and optimizer state: what a model file saves and restores.
    engine::Parameters params;
    // What a pass over a batch writes: activations, deltas, gradients; grown with the batch.
    engine::PassBuffers buffers;
    // Saving and loading move a matrix in chunks of about this many floats (a save: rows of every
    // rank's block at once); tests lower it so that small networks cross chunk boundaries.
    size_t file_chunk_floats = size_t(1) << 24;
    // The most floats (host and backend memory) one save's or load's chunk buffers took at once
    // on this rank, over every save and load so far: tests check that it stays below a matrix.
    mutable size_t file_chunk_peak = 0;

    // The widest layer whose rows travel in a collective (offset: its units; count: the largest
    // cap of those layers); the collective scratch is sized by it.
    engine::Band moving_side() const;
    // The largest rank's storage, as allocated (the memory plan and the model-parallel summary):
    // owner edge wi's block rows and row stride (padded_ld of the largest band of columns), and
    // the floats per batch row of layer l's activation or delta buffer.
    void largest_block(int wi, double* rows, double* ld) const;
    double largest_band_floats(int l) const;
    // Collectives over layer bands (split networks); they move packed blocks of cap columns per
    // row and rank, repacking a padded band (ld > n_local) through plan.comm_local.
    // gather_columns: every rank's band of layer l (`local`: [batch, n_local], the band's ld)
    // -> full [batch, n] (any ld). reduce_scatter_columns: the sum over ranks of full partial
    // rows [batch, n] (any ld) -> this rank's band of layer l, out := sum + beta * out.
    void gather_columns(int l, ConstMatrixView local, MatrixView full) const;
    void reduce_scatter_columns(int l, ConstMatrixView full, float beta, MatrixView out) const;
    // In place over the ranks (backend memory).
    void all_reduce(float* data, size_t count, CommOp op) const;
    // SoftMax (with the bias) of layer l, whose rows are split across ranks, in place on z.
    void split_softmax(int l, MatrixView z) const;
    // DeltaNorm of rows split across ranks (normalize_rows with one rank).
    void clip_delta_rows(float max_norm, MatrixView d) const;
    // Collective: the whole [rows, cols] matrix of owner edge wi (or the whole bias of layer l)
    // from every rank's block `local` (host, this rank's [local_rows, local_cols] / [n_local]),
    // on every rank. With one rank, `local` itself.
    std::vector<float> assemble_weight(int wi, std::vector<float> local) const;
    std::vector<float> assemble_bias(int l, std::vector<float> local) const;
    // Receives the rows of a matrix as they are gathered: [rows, cols] row-major values of rows
    // [first_row, first_row + rows).
    using RowSink = std::function<void(uint64_t first_row, uint64_t rows, const float* values)>;
    // Collective: every row of owner edge wi's matrix `values` (its weights or an optimizer slot)
    // once, on rank 0 only, in chunks of about file_chunk_floats: a split matrix gathered chunk
    // by chunk from every rank's block (by output columns: each chunk's rows assembled from
    // every band), a whole one (one rank, data parallelism) from rank 0's own copy. No rank ever
    // holds more than a chunk of the matrix beside its own block.
    void stream_weight_rows(int wi, const DeviceArray<float>& values, const RowSink& on_rows) const;
    // The model file's layout of this network; training (nullable): a checkpoint's, with the
    // optimizer's state slots.
    io::ModelLayout model_layout(const io::ModelTrainingState* training) const;
    // Collective: "" when every parameter (weights, biases) is finite, else "<n> values of <name>
    // are NaN or infinite" for the first that is not; every rank counts its own blocks and gets
    // the same text.
    std::string nonfinite_parameters() const;
    // Collective: writes the model (training, nullable: a checkpoint, with the optimizer state)
    // to path atomically (io::ModelWriter): rank 0 writes every matrix as stream_weight_rows
    // hands it the rows. After a failure it keeps taking part in the gathers without writing;
    // then every rank throws the same category.
    void write_file(const std::string& path, const io::ModelTrainingState* training) const;
    // Sets every parameter (with_state: and the allocated optimizer slots) from the file, each
    // rank reading only its blocks (hyperslabs, in chunks of file_chunk_floats); errors name
    // the file.
    void restore(const io::ModelReader& file, bool with_state);
    // This rank's block of owner edge wi's slot from the file into `block`.
    void read_weight_block(const io::ModelReader& file, int wi, io::ModelSlot slot,
                           DeviceArray<float>& block) const;
    // The same rows, [count, local_cols] packed from `first` on, handed to on_rows chunk by chunk.
    void read_weight_chunks(const io::ModelReader& file, int wi, io::ModelSlot slot,
                            const RowSink& on_rows) const;
    // Network::load's choice, before allocate_parameters: what each owner matrix keeps
    // (EdgeParams::kept) under `load`, and the released output layer.
    void choose_kept(const LoadOptions& load);
    // Whether every use of owner edge wi's matrix is a csr_matmul of an input layer, and the
    // matrix whole on this rank: what keep_bf16_input_weights keeps in BF16 alone.
    bool sparse_only_matrix(int wi) const;
    // This rank's block of a whole matrix / bias (host).
    std::vector<float> weight_block(int wi, const std::vector<float>& whole) const;
    std::vector<float> bias_block(int l, const std::vector<float>& whole) const;

    // ---- the graph and the plan ----
    // The graph from graph.config (layers, edges, ties, skips, order; "N": "auto" resolved) and
    // the plan (plan_parallel, and each owner edge's dense_grad); no parameter memory yet. The
    // graph's only writer (feature names aside).
    void build(const std::map<std::string, uint32_t>& dataset_widths);
    // Parts of build(): ties shared edges to their owners, links Skip layers (the config
    // checked names and acyclicity; these check widths and what the engine runs).
    void link_shared_weights(const std::string& where);
    void link_skips(const std::string& where);
    // The plan's bands of every layer over `num_ranks` ranks as rank `this_rank` sees them and
    // each matrix's split; refuses what a split network cannot run yet. build() calls it with the
    // communicator's ranks; describe_model_parallel with any count.
    void plan_split(const std::string& where, int num_ranks, int this_rank);
    // Chooses model or data parallelism over the communicator's ranks (options.parallel) and
    // plans it.
    void plan_parallel(const std::string& where);
    // Bytes each rank sends per training step of `batch` rows: split as planned (model), or
    // all-reducing every gradient (data; ring all-reduce, 2 (P - 1) / P of the gradients).
    double model_bytes_per_step(double batch) const;
    double data_bytes_per_step(int num_ranks) const;
    // Data parallelism: sums every gradient of the step over the ranks (in place), and zeroes
    // them on a rank whose share of a batch is empty.
    void all_reduce_gradients();
    void zero_gradients();
    static engine::Split split_rule(const engine::GraphEdge& w);
    // ---- parameters ----
    // Sizes params and buffers to the graph and allocates this rank's blocks of the weights and
    // biases, and the bias gradients (after build()).
    void allocate_parameters();
    // Draws every owned weight matrix from its WeightInit (seeded) and sets every bias to its
    // WeightInit's Bias. Network::load skips the draws (initialize_biases only): the file holds
    // every owned matrix, and drawing ML-20M's 56M Gaussians took 1.2 s of a 2.3 s load.
    void initialize_weights(uint64_t seed);
    void initialize_biases();

    // ---- pass buffers and passes ----
    // Grows activation / delta buffers (and a split network's collective scratch) for batches of
    // up to `batch` rows.
    void ensure_batch_capacity(size_t batch);
    // Grows the row-sparse gradient buffers for batches of up to `nnz` input nonzeros.
    void ensure_sparse_capacity(size_t nnz);
    // Allocates optimizer state slots for `kind` (zeroed) if not allocated yet (params), and the
    // owner edges' dense gradients (buffers).
    void ensure_optimizer_state(OptimizerKind kind);

    // Forward pass over one batch. training: dropout and denoising on, keyed by mask_seed.
    void forward(const engine::Bindings& data, const BatchRows& rows, bool training,
                 uint64_t mask_seed);
    // The same pass into activations the caller owns, on backend `be`: act[l] is [rows.batch, n]
    // (ld = n = graph.layers[l].n) for every non-input layer l. It reads the network and writes
    // only act and be's scratch, so several threads may run it at once on one network, each with
    // its own buffers and backend (the Recommender does), while nothing modifies the network.
    // skip_layer: a layer no other reads, left uncomputed (the Recommender's fp16 screening
    // computes its output layer itself).
    // act_bf16 (nullable; else one entry per layer, nullptr where none): BF16 copies of act[l]
    // that the producing ops write and the next layers' GEMMs read (the network's own buffers:
    // LayerBuffers::act_bf16). A layer with a copy is never skip_layer nor a deferred output.
    void forward(Backend& be, const std::vector<float*>& act, const engine::Bindings& data,
                 const BatchRows& rows, bool training, uint64_t mask_seed, int skip_layer = -1,
                 bool defer_output_activation = false,
                 const std::vector<uint16_t*>* act_bf16 = nullptr) const;
    // Output deltas and backward pass: fills every needed weight/bias gradient.
    // loss_sum (nullable) accumulates the summed loss of the batch.
    void backward(const engine::Bindings& data, const BatchRows& rows, bool training,
                  uint64_t mask_seed, double* loss_sum);
    // One optimizer step on every trained parameter. decay: DSSTNE's Decay, the learning rate of
    // step t (counted by optimizer_steps) is learning_rate / (1 + decay * (t - 1)).
    void update(const OptimizerOptions& optimizer, float decay);
    // Whether owner edge wi's dense weight gradient may be left to update() (see
    // PassBuffers::defer_dense_grads): one use, a dense source, one process's batch (split or
    // not: a split matrix's operands are kept, EdgeBuffers::gathered and LayerBuffers::delta_all).
    bool gradient_deferrable(int wi) const;
    // Whether owner edge wi's row-sparse gradient may be left to update() (see
    // PassBuffers::defer_sparse_grads): a sparse input with one use, one process's batch (split
    // by input rows or not).
    bool sparse_gradient_deferrable(int wi) const;
    // Whether output layer l's delta is written over its activations (planned once:
    // LayerBand::delta_over_act). output_delta and output_epilogue read each element's
    // activation before they write its delta, so the only readers that forbid it are other
    // layers: an edge from l (its weight gradient reads l's activations in backward, after l's
    // delta is formed) or a Skip of l. SPARSENET_DELTA_OVER_ACTIVATION=0 keeps two buffers (read
    // when a network is planned; to compare).
    bool delta_over_activation(int l) const;
    // Split networks: whether layer l has a matrix split by input rows into it, whose weight
    // gradient reads l's whole delta (gathered into LayerBuffers::delta_all).
    bool gathers_delta(int l) const;
    // The delta owner edge wi's deferred gradient reads: its destination's (layer_delta), or,
    // split by input rows, the destination's whole delta gathered in backward (gathered_delta).
    MatrixView deferred_delta(int wi, size_t batch);
    // c := alpha * (owner edge wi's weight gradient of the last backward) + beta * c, from the
    // operands backward left (EdgeBuffers::deferred_rows): the source's activations (split by
    // output columns: every rank's, EdgeBuffers::gathered) and deferred_delta.
    // c_bf16 (nullable): c's BF16 copy, written by the GEMM (Backend::gemm).
    void deferred_gradient_gemm(int wi, float alpha, float beta, MatrixView c,
                                uint16_t* c_bf16 = nullptr);
    // Writes every weight gradient backward left to update() into its gradient buffer (the
    // materialised path: the other optimizers, L1, WeightNorm, the guard's search, reads; a
    // row-sparse one when its step would visit every row).
    void materialize_gradients();
    void materialize_gradient(int wi);
    // The optimizer step of owner edge wi inside its weight-gradient GEMM when that means the
    // same step (update_fusable), the BF16 copy of the new weights included; false: nothing done.
    bool fused_update(int wi, const formulas::OptimizerStep& step);
    // Whether owner edge wi's step with `step`'s rule is fused into its gradient GEMM: SGD or
    // Momentum, no L1, no WeightNorm on the edge, a deferrable gradient; then training never
    // writes its dense gradient (plan_memory leaves it out: it is allocated only when read).
    bool update_fusable(int wi, const formulas::OptimizerStep& step) const;
    // StepSwitches::fused_update off turns the fused steps off (the materialised path of before,
    // to compare the two); training, the memory plan and the model-parallel summary all ask here.
    bool fused_updates_enabled() const { return options.switches.fused_update; }
    // engine::padded_ld with this network's StepSwitches::padded_ld.
    uint32_t padded_ld(uint32_t cols) const {
        return engine::padded_ld(cols, options.switches.padded_ld);
    }
    // Owner edge wi's dense gradient [local_rows, local_cols], allocated on first use (a
    // network whose every dense update is fused never holds one; parameter_gradients(), the
    // guard's search, the other optimizers, data parallelism allocate it).
    MatrixView dense_gradient(int wi);

    // ---- exact sparse updates in time proportional to the batch (Momentum, Nesterov) ----
    // Row-sparse matrices whose exact update keeps a row clock (EdgeParams::row_clock) instead
    // of walking every row: a row the batch does not touch is left behind, and caught up over
    // its skipped steps in closed form (formulas::catch_up_coefficients) before it is next read.
    struct RowCatchUp {
        bool pending = false;          // some rows are behind the step count
        formulas::OptimizerStep step;  // the rule they are behind on (the last step's)
        std::vector<bool> clocked;     // by edge: its rows may be behind
    };
    RowCatchUp catch_up;
    // Whether owner edge wi's step runs on a row clock (update()).
    bool uses_row_clock(int wi, const OptimizerOptions& optimizer,
                        const formulas::OptimizerStep& step, bool constant_rate) const;
    // Before a training forward pass: the rows the batch's sparse inputs read, brought up to
    // the step count.
    void catch_up_batch(const engine::Bindings& data, const BatchRows& rows);
    // Every row of every clocked matrix brought up to the step count (before anything reads
    // the weights outside a training step: a file, a parameter, an inference pass, the end of
    // an epoch). Nothing when no row is behind.
    void catch_up_all();

    // The objective's terms that need no gradient: every output loss (scale 1) and every
    // sparseness penalty of the batch, added to *loss_sum. Runs after forward().
    void add_losses(const engine::Bindings& data, const BatchRows& rows, double* loss_sum);

    // The loss of an output layer; `targets` (its bound dataset) sets ignore_zero.
    formulas::LossParams loss_params(const engine::GraphLayer& output,
                                     const engine::DeviceDataset& targets) const;
    // The dropout mask of hidden layer l (alpha dropout on ELU/SELU layers, else inverted).
    DropoutMask dropout_mask(int l, const BatchRows& rows, uint64_t mask_seed) const;
    // Hidden layers whose sparseness penalty is part of the objective.
    bool penalized(const engine::GraphLayer& layer) const;
    // The denoising and dropout of input layer l's stored entries.
    SparseNoise input_noise(int l, bool training, uint64_t mask_seed) const;
    // The matrix edge w multiplies by: its owner's [rows, cols] storage (w.transposed: the edge
    // uses it transposed).
    // Every matrix and layer buffer of the network holds zeros in its padding columns (allocated
    // filled, written only over [0, cols) by every op but gemm, which writes zeros there): its
    // views are zero_padded, so that the GPU's GEMMs run aligned extents (backend/gemm_extents.h).
    // Under Precision::kBf16 the view carries the matrix's BF16 copy (EdgeParams::w_bf16), which
    // gemm reads instead of rounding the weights each time.
    ConstMatrixView matrix_of(const engine::GraphEdge& w) const {
        const engine::EdgeSplit& block = plan.edges[w.owner];
        const engine::EdgeParams& p = params.edges[w.owner];
        return {p.w.data(), block.local_rows,     block.local_cols,
                block.ld,   /*zero_padded=*/true, p.w_bf16.data()};
    }
    // Layer l's activation or delta buffer: [batch, n_local], the plan's row stride.
    MatrixView layer_rows(DeviceArray<float>& buffer, int l, size_t batch) const {
        return {buffer.data(), batch, plan.layers[l].n_local, plan.layers[l].ld,
                /*zero_padded=*/true};
    }
    // Layer l's delta: its own buffer, or its activations' where the delta is written over them
    // (plan.layers[l].delta_over_act).
    MatrixView layer_delta(int l, size_t batch) {
        engine::LayerBuffers& buf = buffers.layers[l];
        return layer_rows(plan.layers[l].delta_over_act ? buf.act : buf.delta, l, batch);
    }
    // Layer l's activations / delta as a GEMM operand: with their BF16 copy where the layer keeps
    // one (LayerBuffers::act_bf16, delta_bf16), which a BF16 GEMM reads in place.
    ConstMatrixView act_operand(int l, size_t batch) {
        ConstMatrixView v = layer_rows(buffers.layers[l].act, l, batch);
        v.bf16 = buffers.layers[l].act_bf16.data();
        return v;
    }
    ConstMatrixView delta_operand(int l, size_t batch) {
        ConstMatrixView v = layer_delta(l, batch);
        v.bf16 = buffers.layers[l].delta_bf16.data();
        return v;
    }
    // The BF16 copies the producers write (nullptr where layer l keeps none).
    uint16_t* act_copy(int l) { return buffers.layers[l].act_bf16.data(); }
    uint16_t* delta_copy(int l) { return buffers.layers[l].delta_bf16.data(); }
    // Split networks: layer l's whole rows in `buffer` ([batch, n], row stride
    // plan.layers[l].whole_ld, zeros in the padding): layer l's gathered delta
    // (LayerBuffers::delta_all), a source's gathered activations (EdgeBuffers::gathered), or
    // the partial rows of a reduce-scatter (plan.full_partial: only ever a GEMM's output with
    // beta 0 or csr_matmul's, whose padding nothing reads).
    MatrixView whole_rows(float* buffer, int l, size_t batch) const {
        return {buffer, batch, graph.layers[l].n, plan.layers[l].whole_ld, /*zero_padded=*/true};
    }
    MatrixView gathered_delta(int l, size_t batch) {
        return whole_rows(buffers.layers[l].delta_all.data(), l, batch);
    }
    // Owner edge wi (split by output columns): its source's activations gathered from every
    // rank by forward.
    MatrixView gathered_source(int wi, size_t batch) const {
        return whole_rows(buffers.edges[wi].gathered.data(), graph.edges[wi].source, batch);
    }
    // Owner edge wi's weights, a state slot or its gradient: [local_rows, local_cols], row
    // stride plan.edges[wi].ld.
    MatrixView matrix_rows(DeviceArray<float>& buffer, int wi) const {
        const engine::EdgeSplit& block = plan.edges[wi];
        return {buffer.data(), block.local_rows, block.local_cols, block.ld, /*zero_padded=*/true};
    }
    // Host staging of a padded transfer (upload_rows, download_rows, Training::add_rows): at
    // most this many floats of rows at a time (64 MB), never a whole padded copy of a matrix
    // (Gowalla's item-item matrix is 6.7 GB).
    static constexpr size_t kStagingRowFloats = size_t(16) << 20;
    // Rows [first, first + count) of a backend matrix with row stride ld from / to packed host
    // rows [count, cols] (by kStagingRowFloats blocks; padding columns written as zeros).
    void upload_rows(DeviceArray<float>& buffer, size_t ld, size_t first, size_t count, size_t cols,
                     const float* packed) const;
    void download_rows(const DeviceArray<float>& buffer, size_t ld, size_t first, size_t count,
                       size_t cols, float* packed) const;
    // The layer index of a bias name, or (weights, any edge's name) the owner edge's index.
    int find_parameter(const std::string& name, bool* is_bias) const;
    std::string weight_name(const engine::GraphEdge& w) const;  // "weight:<source>-><destination>"
    // The owner edge wi's gradient of the last backward, dense [local_rows, local_cols] (zeros
    // where backward wrote none): this rank's block.
    std::vector<float> weight_gradient(int wi);
    // WeightNorm after the step of owner edge wi: every edge using its matrix clips the incoming
    // vectors of its destination's units (columns of the matrix, or rows when transposed).
    void apply_weight_norms(int wi);
    bool has_weight_norm(int wi) const;

    // ---- BF16 weight copies (Precision::kBf16; EdgeParams::w_bf16) ----
    // Whether some use of owner edge wi's matrix is a gemm operand (its source is not an input
    // layer: csr_matmul and csr_weight_grad read FP32 weights in every precision).
    bool gemm_reads_matrix(int wi) const;
    // StepSwitches::bf16_weight_copies off: no copies, every BF16 GEMM rounds the FP32 weights
    // itself (the path of before; the same values: to compare).
    // Whether owner edge wi keeps a BF16 copy: the backend computes in kBf16, copies are
    // enabled and a gemm reads the matrix.
    bool keeps_bf16_copy(int wi) const;
    // Allocates (and writes, one round_bf16 pass each) or frees every owner edge's copy to match
    // keeps_bf16_copy: after the weights are initialised or loaded, and at a change of precision.
    void sync_bf16_copies();
    // One round_bf16 pass of owner edge wi's weights into its copy (nothing without a copy):
    // after every write of the weights that did not write the copy in the same pass.
    void refresh_bf16_copy(int wi);
    // ---- BF16 copies of activations and deltas (Precision::kBf16; LayerBuffers::act_bf16,
    // delta_bf16; issue 46) ----
    // StepSwitches::bf16_activation_copies off: none, every BF16 GEMM converts the activations
    // and deltas it reads (the path of before, the same values: to compare).
    // Whether layer l keeps a BF16 copy of its activations / delta under precision p: a GEMM
    // reads them, and the op that writes them last before that GEMM can write the copy in its
    // pass. Activations: a non-input layer with an edge out of it (the next layer's forward
    // GEMM, the weight-gradient GEMM), one process's whole layer (not split: a split network's
    // GEMMs read gathered rows). Deltas: a layer with a trained edge from a non-input layer
    // into it (the weight-gradient and input-delta GEMMs), not split, no DeltaNorm (clip_rows
    // rescales rows after the producer), and for an output layer no edge or Skip out of it (the
    // GEMMs and add_matrix of later layers add into its delta after output_delta wrote it).
    // Static in the graph (the memory plan asks without a backend).
    bool keeps_act_bf16(int l, Precision p) const;
    bool keeps_delta_bf16(int l, Precision p) const;
    // Allocates (zeros: the padding), or frees, every layer's copies to match keeps_*_bf16 at
    // the backend's precision, for batch_capacity rows: after ensure_batch_capacity and at a
    // change of precision.
    void sync_activation_copies();

    // Error(kUsage) naming `what` (training, a save, ...) when keep_only_bf16_weights freed FP32
    // weights (wi >= 0: only if owner edge wi's were freed).
    void require_fp32_weights(const std::string& what, int wi = -1) const;
};

}  // namespace sparsenet
