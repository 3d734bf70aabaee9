// describe_model_parallel: the split plan of a network over P ranks, computed, not run.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "engine/network_impl.h"
#include "formulas/optimizer.h"
#include "sparsenet/error.h"

namespace sparsenet {

namespace {

std::string bytes_text(double bytes) {
    char buf[32];
    if (bytes >= 1e9) {
        std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
    } else if (bytes >= 1e6) {
        std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
    } else if (bytes >= 1e3) {
        std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
    } else {
        std::snprintf(buf, sizeof buf, "%.0f B", bytes);
    }
    return buf;
}

}  // namespace

std::string describe_model_parallel(const NetworkConfig& config,
                                    const std::map<std::string, uint32_t>& dataset_widths,
                                    int ranks, uint32_t batch, OptimizerKind optimizer) {
    if (ranks < 1) throw Error(ErrorCategory::kUsage, "ranks must be >= 1");
    if (batch == 0) throw Error(ErrorCategory::kUsage, "batch size must be positive");
    Network::Impl net;
    net.graph.config = config;
    net.backend = make_backend("cpu", 1);  // only for the capability checks of build()
    net.build(dataset_widths);
    // The largest bands are rank 0's or the last rank's; cap is the largest of all.
    net.plan_split(config.name.empty() ? "network" : config.name, ranks, 0);
    const double B = batch, P = ranks, f = sizeof(float);
    const int slots = formulas::optimizer_state_slots(optimizer);
    std::ostringstream out;
    out << "model parallelism: " << ranks << (ranks == 1 ? " rank" : " ranks") << ", batch "
        << batch << ", " << to_string(optimizer) << " (" << slots << " state slot"
        << (slots == 1 ? "" : "s") << " per weight)\n";
    out << "layers (units per rank: the largest band):\n";
    double act_bytes = 0.0;
    for (size_t l = 0; l < net.graph.layers.size(); ++l) {
        const engine::GraphLayer& layer = net.graph.layers[l];
        const uint32_t cap = net.plan.layers[l].cap;
        out << "  " << layer.config.name << " (" << to_string(layer.config.kind) << "): " << layer.n
            << " units, " << cap << " per rank\n";
        // Activations + deltas (one buffer where the delta is written over the activations),
        // rows padded as allocated.
        if (!layer.is_input())
            act_bytes += (net.plan.layers[l].delta_over_act ? 1.0 : 2.0) * B *
                         net.largest_band_floats(int(l)) * f;
    }
    out << "weights (block = the largest rank's; traffic = bytes each rank sends per step):\n";
    double param_bytes = 0.0, gathered_bytes = 0.0;
    for (size_t i = 0; i < net.graph.edges.size(); ++i) {
        const engine::GraphEdge& w = net.graph.edges[i];
        if (w.owner != static_cast<int>(i)) continue;
        const engine::EdgeSplit& part = net.plan.edges[i];
        const engine::GraphLayer& src = net.graph.layers[w.source];
        const engine::GraphLayer& dst = net.graph.layers[w.destination];
        const uint32_t src_cap = net.plan.layers[w.source].cap;
        const uint32_t dst_cap = net.plan.layers[w.destination].cap;
        const bool by_output = part.split == engine::Split::kByOutput;
        const double cols = by_output ? dst_cap : w.cols;
        double rows = 0, ld = 0;  // the block as stored: rows padded to ld floats
        net.largest_block(static_cast<int>(i), &rows, &ld);
        // Parameters, the dense gradient (sparse sources keep a row-sparse one instead; none
        // where the step runs inside the gradient GEMM, as plan_memory), state; a fixed matrix
        // (FixedWeights) has only its values.
        formulas::OptimizerStep rule;
        rule.kind = optimizer;
        const bool fused =
            net.fused_updates_enabled() && net.update_fusable(static_cast<int>(i), rule);
        const bool grad = part.dense_grad && !fused;
        const double per_value = f * (1.0 + (grad ? 1.0 : 0.0) + (w.fixed ? 0 : slots));
        param_bytes += rows * ld * per_value;
        out << "  " << src.config.name << " -> " << dst.config.name << " [" << w.rows << " x "
            << w.cols << "]: ";
        if (part.split == engine::Split::kNone) {
            out << "whole on one rank\n";
            continue;
        }
        // Collectives move blocks of cap columns per rank: each rank sends (P - 1) of them.
        double step = 0.0;
        std::string forward, backward;
        if (by_output) {
            const double block = B * src_cap * f;
            forward = "all-gather " + src.config.name + " activations [" + std::to_string(batch) +
                      " x " + std::to_string(w.rows) + "]";
            step += (P - 1) * block;
            gathered_bytes += B * net.plan.layers[w.source].whole_ld * f;
            if (src.reaches_output && !src.is_input()) {
                backward = "reduce-scatter " + src.config.name + " delta";
                step += (P - 1) * block;
            } else {
                backward = "none";
            }
        } else {
            const double block = B * dst_cap * f;
            forward = "reduce-scatter partial " + dst.config.name + " [" + std::to_string(batch) +
                      " x " + std::to_string(w.cols) + "]";
            backward = "all-gather " + dst.config.name + " delta";
            step += 2.0 * (P - 1) * block;
        }
        out << "split " << engine::to_string(part.split) << ", block [" << rows << " x " << cols
            << "] (" << bytes_text(rows * ld * f)
            << (ld > cols ? ", rows padded to " + std::to_string(uint64_t(ld)) : std::string())
            << "); forward: " << forward << "; backward: " << backward << "; " << bytes_text(step)
            << " per step\n";
    }
    for (size_t l = 0; l < net.graph.layers.size(); ++l) {
        if (net.graph.layers[l].is_input()) continue;
        param_bytes += double(net.plan.layers[l].cap) * f * (2.0 + slots);  // bias, gradient, state
    }
    const engine::Band moving = net.moving_side();  // as ensure_batch_capacity sizes scratch
    for (size_t l = 0; l < net.graph.layers.size(); ++l) {
        if (net.gathers_delta(int(l))) gathered_bytes += B * net.plan.layers[l].whole_ld * f;
    }
    const double scratch =
        ranks > 1
            ? (B * net.padded_ld(moving.offset) + (P + 1.0) * B * moving.count + 2.0 * B) * f +
                  gathered_bytes
            : 0.0;
    out << "memory per rank (largest): parameters, gradients and optimizer state "
        << bytes_text(param_bytes) << "; batch buffers " << bytes_text(act_bytes + scratch)
        << "; datasets not included (each rank holds its columns of every example)\n";
    const double model = net.model_bytes_per_step(B), data = net.data_bytes_per_step(ranks);
    out << "traffic per rank per step: model parallel " << bytes_text(model)
        << "; data parallel would all-reduce every gradient: " << bytes_text(data)
        << (ranks > 1 ? (model <= data ? " (auto: model)" : " (auto: data)") : "") << "\n";
    return out.str();
}

}  // namespace sparsenet
