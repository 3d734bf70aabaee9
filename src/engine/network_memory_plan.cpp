// plan_memory / describe_memory / free_memory_for / check_memory_plan: the memory of a training
// run computed from the config and the datasets' shapes, as the engine allocates it
// (Network::Impl::allocate_parameters, ensure_batch_capacity, ensure_sparse_capacity,
// ensure_optimizer_state, BoundData, the Trainer's permutation), without allocating anything.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "comm/node_rank.h"
#include "engine/network_impl.h"
#include "formulas/optimizer.h"
#include "sparsenet/error.h"
#include "sparsenet/resources.h"

namespace sparsenet {

namespace {

std::string gb(double bytes) {
    char buf[32];
    if (bytes >= 1e9) {
        std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
    } else if (bytes >= 1e6) {
        std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
    } else {
        std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
    }
    return buf;
}

// The stored entries of `rows` rows of a dataset of `shape`, estimated from its mean row length:
// the sparse gradient holds at most min(rows of W, entries of the batch) rows. The engine sizes
// it by the batch's longest rows (BoundData::max_input_nnz), which a header does not give; four
// times the mean bounds it for the generator's power-law rows at batch >= 64 (a 1,000,000-item
// dataset at 20 entries per user: the longest 256 rows hold 2.9 times the mean), and the buffer
// is small beside the weights (batch 256 x 100 entries x 4 x 256 columns x 4 B = 105 MB at
// 10,000,000 items).
double batch_entries(const DatasetShape& shape, double rows) {
    if (shape.rows == 0) return 0.0;
    const double mean = double(shape.nnz) / double(shape.rows);
    return std::min(double(shape.nnz), std::ceil(4.0 * mean * rows));
}

// One copy of a dataset: CSR offsets (8 B per row + 1), column ids and values (4 B per stored
// entry; a boolean dataset stores no values), example weights (4 B per row). `share`: the
// fraction of the entries this rank holds (its column band).
double dataset_bytes(const DatasetShape& s, double share) {
    const double rows = double(s.indexed ? s.examples : s.rows);
    const double nnz = s.indexed && s.rows > 0 ? double(s.nnz) * rows / double(s.rows) : s.nnz;
    return 8.0 * (rows + 1) + nnz * share * (s.boolean ? 4.0 : 8.0) + (s.weighted ? 4.0 * rows : 0);
}

}  // namespace

double MemoryPlan::device_bytes() const {
    return weights + bf16_weights + biases + optimizer_state + row_clocks + dense_weight_gradients +
           other_gradients + activations + bf16_activations + scratch + datasets + file_chunks;
}

double MemoryPlan::total_bytes(bool device_is_host) const {
    return device_bytes() + (device_is_host ? host_datasets : 0.0);
}

MemoryPlan plan_memory(const NetworkConfig& config,
                       const std::map<std::string, DatasetShape>& datasets, int ranks,
                       uint32_t batch, const OptimizerOptions& optimizer, float decay,
                       bool data_parallel, Precision precision, const StepSwitches& switches) {
    const bool fuse_updates = switches.fused_update;
    if (ranks < 1) throw Error(ErrorCategory::kUsage, "ranks must be >= 1");
    if (batch == 0) throw Error(ErrorCategory::kUsage, "batch size must be positive");
    std::map<std::string, uint32_t> widths;
    for (const auto& kv : datasets) widths[kv.first] = kv.second.cols;
    Network::Impl net;
    net.options.switches = switches;
    net.graph.config = config;
    net.backend = make_backend("cpu", 1);  // only for the capability checks of build()
    net.build(widths);
    net.plan_split(config.name.empty() ? "network" : config.name, ranks, 0);
    const double f = sizeof(float), P = ranks;
    const int slots = formulas::optimizer_state_slots(optimizer.kind);
    formulas::OptimizerStep step;
    step.kind = optimizer.kind;
    step.l1 = optimizer.l1;
    step.l2 = optimizer.l2;
    MemoryPlan m;
    m.precision = precision;
    // Network::Impl::keeps_bf16_copy without a backend to ask for the precision.
    const bool bf16_copies = precision == Precision::kBf16 && switches.bf16_weight_copies;
    m.ranks = ranks;
    m.batch = batch;
    // Rows of a batch (the training data's examples cap it).
    double examples = 0;
    for (const auto& kv : datasets)
        examples =
            std::max(examples, double(kv.second.indexed ? kv.second.examples : kv.second.rows));
    const double B = examples > 0 ? std::min<double>(batch, examples) : batch;
    double largest_matrix = 0;
    for (size_t i = 0; i < net.graph.edges.size(); ++i) {
        const engine::GraphEdge& w = net.graph.edges[i];
        if (w.owner != static_cast<int>(i)) continue;
        const engine::EdgeSplit& part = net.plan.edges[i];
        // The largest rank's block, its rows padded (engine::padded_ld), split or not; `cols` is
        // the row stride, which the state slots and the dense gradient share.
        double rows = 0, cols = 0;
        net.largest_block(static_cast<int>(i), &rows, &cols);
        m.weights += rows * cols * f;
        if (bf16_copies && net.gemm_reads_matrix(static_cast<int>(i)))
            m.bf16_weights += rows * cols * 2.0;
        largest_matrix = std::max(largest_matrix, double(w.rows) * w.cols);
        if (w.fixed) continue;  // never trained: no state, no gradient
        m.optimizer_state += slots * rows * cols * f;
        // A dense gradient exists only where training writes it: not where the step is fused
        // into the gradient GEMM (SGD, Momentum on a dense edge used once, split or not, one
        // process's batch).
        const bool fused =
            fuse_updates && !data_parallel && net.update_fusable(static_cast<int>(i), step);
        if (part.dense_grad && !fused) m.dense_weight_gradients += rows * cols * f;
        if (w.sparse_source) {
            const auto it = datasets.find(net.graph.layers[w.source].config.dataset);
            const double entries = it == datasets.end() ? rows : batch_entries(it->second, B) / P;
            const double capacity = std::min(rows, std::max(entries, 1.0));
            // The row-sparse gradient's rows are packed ([capacity, local_cols]).
            const double local_cols = part.split == engine::Split::kByOutput
                                          ? net.plan.layers[w.destination].cap
                                          : double(w.cols);
            m.other_gradients += capacity * (local_cols * f + 4.0) + 4.0;
            // csr_weight_grad's scratch: a count per input row, and the batch's entries sorted
            // by row (ids and coefficients); the every-row exact update's row map (4 B a row).
            m.scratch += 4.0 * rows + 16.0 * capacity;
            const bool every_row = optimizer.sparse_update == SparseUpdate::kExact &&
                                   !formulas::zero_gradient_is_noop(step);
            bool clocked = every_row && formulas::catch_up_exact(step, decay == 0.0f);
            for (const engine::GraphEdge& u : net.graph.edges) {
                if (u.owner == static_cast<int>(i) &&
                    net.graph.layers[u.destination].config.weight_norm > 0.0f)
                    clocked = false;
            }
            if (!part.dense_grad && clocked) m.row_clocks += 4.0 * rows;
            if (!part.dense_grad && every_row && !clocked) m.scratch += 4.0 * rows;
        }
    }
    for (size_t l = 0; l < net.graph.layers.size(); ++l) {
        const engine::GraphLayer& layer = net.graph.layers[l];
        if (layer.is_input()) continue;
        const double cap = net.plan.layers[l].cap;
        m.biases += cap * f;
        m.optimizer_state += slots * cap * f;
        m.other_gradients += cap * f;
        // Activations and deltas, padded rows (split or not); one buffer for both where the
        // delta is written over the activations (an output layer no other layer reads).
        const double buffers_of_layer = net.plan.layers[l].delta_over_act ? 1.0 : 2.0;
        m.activations += buffers_of_layer * B * net.largest_band_floats(int(l)) * f;
        // Their BF16 copies (Network::Impl::sync_activation_copies: batch x ld, 2 B a value).
        const double copies = double(net.keeps_act_bf16(int(l), precision)) +
                              double(net.keeps_delta_bf16(int(l), precision));
        m.bf16_activations += copies * B * net.plan.layers[l].ld * 2.0;
    }
    if (ranks > 1) {  // ensure_batch_capacity's collective scratch
        const engine::Band moving = net.moving_side();
        // Forward's gathered source activations (by output columns) and backward's gathered
        // deltas (by input rows, one per layer), both kept until update(); whole rows padded
        // (LayerBand::whole_ld), as the partial rows.
        double gathered = 0;
        for (size_t i = 0; i < net.graph.edges.size(); ++i) {
            if (net.plan.edges[i].split == engine::Split::kByOutput)
                gathered += B * net.plan.layers[net.graph.edges[i].source].whole_ld * f;
        }
        for (size_t l = 0; l < net.graph.layers.size(); ++l) {
            if (net.gathers_delta(int(l))) gathered += B * net.plan.layers[l].whole_ld * f;
        }
        m.scratch +=
            (B * net.padded_ld(moving.offset) + (P + 1.0) * B * moving.count + 2.0 * B) * f +
            gathered;
    }
    // The datasets the layers bind, once per name (inputs and outputs), each rank its band of
    // the entries; the Trainer's batch permutation (4 B per example).
    std::set<std::string> bound;
    for (const engine::GraphLayer& layer : net.graph.layers) {
        if (layer.is_input() || layer.is_output()) bound.insert(layer.config.dataset);
    }
    for (const std::string& name : bound) {
        const auto it = datasets.find(name);
        if (it != datasets.end()) m.datasets += dataset_bytes(it->second, 1.0 / P);
    }
    m.datasets += 4.0 * examples;
    for (const auto& kv : datasets) m.host_datasets += dataset_bytes(kv.second, 1.0 / P);
    // A save streams each matrix in chunks of 2^24 floats (Network::Impl::file_chunk_floats),
    // staged in backend and host memory.
    m.file_chunks = 2.0 * std::min(largest_matrix, double(uint64_t(1) << 24)) * f;
    return m;
}

std::string describe_memory(const MemoryPlan& p, bool device_is_host) {
    std::ostringstream out;
    out << "memory plan "
        << (p.ranks == 1 ? std::string("for one device") : "per rank of " + std::to_string(p.ranks))
        << ", batch " << p.batch
        << (p.precision == Precision::kBf16 ? ", precision bf16 (FP32 masters, BF16 copies)" : "")
        << ":\n";
    const auto line = [&](const char* what, double bytes) {
        if (bytes > 0) out << "  " << what << ": " << gb(bytes) << "\n";
    };
    line("weights", p.weights);
    line("BF16 weight copies (--precision bf16)", p.bf16_weights);
    line("biases", p.biases);
    line("optimizer state", p.optimizer_state);
    line("row clocks (exact Momentum/Nesterov sparse updates)", p.row_clocks);
    line("dense weight gradients", p.dense_weight_gradients);
    line("bias and row-sparse gradients", p.other_gradients);
    line("activations and deltas", p.activations);
    line("BF16 activation and delta copies (--precision bf16)", p.bf16_activations);
    line("scratch", p.scratch);
    line("datasets on the device", p.datasets);
    line("save and checkpoint chunks", p.file_chunks);
    if (device_is_host) {
        line("datasets as read (host)", p.host_datasets);
        out << "  total: " << gb(p.total_bytes(true)) << " of host memory (the CPU device)\n";
    } else {
        out << "  total: " << gb(p.device_bytes()) << " of device memory; the datasets as read "
            << "also take " << gb(p.host_datasets) << " of host memory\n";
    }
    return out.str();
}

uint64_t free_memory_for(const std::string& device, int threads, std::string* what,
                         bool* device_is_host, bool share_gpus) {
    if (device_is_host) *device_is_host = device == "cpu";
    if (const char* v = std::getenv("SPARSENET_MEMORY_LIMIT_BYTES"); v != nullptr && *v != '\0') {
        char* end = nullptr;
        const unsigned long long n = std::strtoull(v, &end, 10);
        if (end == nullptr || *end != '\0') {
            throw Error(ErrorCategory::kUsage, std::string("SPARSENET_MEMORY_LIMIT_BYTES='") + v +
                                                   "': expected a number of bytes");
        }
        if (what) *what = "SPARSENET_MEMORY_LIMIT_BYTES";
        return n;
    }
    const std::unique_ptr<Backend> be =
        make_backend(device, threads, rank_default_gpu(device, share_gpus));
    if (device_is_host) *device_is_host = be->name() == "cpu";
    if (what) *what = be->name() == "cpu" ? "MemAvailable" : be->name() + " free memory";
    return be->free_memory();
}

void check_memory_plan(const NetworkConfig& config,
                       const std::map<std::string, DatasetShape>& datasets, const MemoryPlan& plan,
                       const OptimizerOptions& optimizer, float decay, bool device_is_host,
                       uint64_t free_bytes, const std::string& free_what) {
    const double need = plan.total_bytes(device_is_host);
    if (need <= double(free_bytes)) return;
    std::string text =
        "the training run needs " + gb(need) + " of " + (device_is_host ? "host" : "device") +
        " memory" + (plan.ranks > 1 ? " per rank of " + std::to_string(plan.ranks) : "") +
        " (weights " + gb(plan.weights + plan.bf16_weights) + ", optimizer state " +
        gb(plan.optimizer_state + plan.row_clocks) + ", gradients " +
        gb(plan.dense_weight_gradients + plan.other_gradients) + ", activations and deltas " +
        gb(plan.activations + plan.bf16_activations) + ", datasets " +
        gb(plan.datasets + (device_is_host ? plan.host_datasets : 0.0)) + ", other " +
        gb(plan.biases + plan.scratch + plan.file_chunks) + ") but " + gb(double(free_bytes)) +
        " is free (" + free_what + ")";
    std::vector<std::string> fits;
    // Model parallelism: the fewest ranks (up to 64) whose per-rank share fits.
    for (int p = plan.ranks + 1; p <= 64; ++p) {
        try {
            const MemoryPlan q = plan_memory(config, datasets, p, plan.batch, optimizer, decay,
                                             false, plan.precision);
            if (q.total_bytes(device_is_host) <= double(free_bytes)) {
                fits.push_back("model parallelism over " + std::to_string(p) +
                               " ranks (mpirun -np " + std::to_string(p) + ", " +
                               gb(q.total_bytes(device_is_host)) + " per rank)");
                break;
            }
        } catch (const Error&) {
            break;  // a network that cannot be split that far
        }
    }
    // A smaller batch: the largest power of two below it that fits.
    for (uint32_t b = 1u << 30; b >= 1; b >>= 1) {
        if (b >= plan.batch) continue;
        const MemoryPlan q =
            plan_memory(config, datasets, plan.ranks, b, optimizer, decay, false, plan.precision);
        if (q.total_bytes(device_is_host) <= double(free_bytes)) {
            fits.push_back("--batch " + std::to_string(b) + " (" +
                           gb(q.total_bytes(device_is_host)) + ")");
            break;
        }
    }
    if (fits.empty()) {
        text +=
            "; neither a smaller batch nor up to 64 ranks of model parallelism fits: use a "
            "smaller network (fewer units in the widest layers)";
    } else {
        text += "; what would fit: ";
        for (size_t i = 0; i < fits.size(); ++i) text += (i ? ", or " : "") + fits[i];
    }
    throw Error(ErrorCategory::kDevice, text + " (sparsenet train --dry-run prints the plan)");
}

}  // namespace sparsenet
