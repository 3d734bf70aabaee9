// Reading a model file into a network (Network::load, checkpoints): every rank its blocks of
// each matrix, in blocks of rows, each block going straight into what the network keeps
// (LoadOptions in sparsenet/network.h: FP32 weights, a BF16 copy alone, or only a fingerprint).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine/network_impl.h"
#include "engine/output_fingerprint.h"
#include "formulas/precision.h"
#include "io/model_file.h"
#include "sparsenet/error.h"

namespace sparsenet {

using engine::GraphEdge;
using engine::GraphLayer;

void Network::Impl::read_weight_chunks(const io::ModelReader& file, int wi, io::ModelSlot slot,
                                       const RowSink& on_rows) const {
    const engine::EdgeSplit& mine = plan.edges[wi];  // this rank's block of the matrix
    if (mine.local_cols == 0) return;
    const size_t chunk = std::max<size_t>(1, file_chunk_floats / mine.local_cols);
    std::vector<float> host(std::min<size_t>(chunk, mine.local_rows) * mine.local_cols);
    // upload_rows (and the BF16 rows) add a padded copy of the chunk where ld > cols.
    const size_t padded = mine.ld == mine.local_cols ? 0 : host.size() / mine.local_cols * mine.ld;
    file_chunk_peak = std::max(file_chunk_peak, host.size() + padded);
    for (size_t first = 0; first < mine.local_rows; first += chunk) {
        const size_t count = std::min<size_t>(chunk, mine.local_rows - first);
        file.read_block(size_t(wi), slot, mine.row_offset + first, count, mine.col_offset,
                        mine.local_cols, host.data());
        on_rows(first, count, host.data());
    }
}

void Network::Impl::read_weight_block(const io::ModelReader& file, int wi, io::ModelSlot slot,
                                      DeviceArray<float>& block) const {
    const engine::EdgeSplit& mine = plan.edges[wi];
    read_weight_chunks(file, wi, slot, [&](uint64_t first, uint64_t count, const float* values) {
        upload_rows(block, mine.ld, first, count, mine.local_cols, values);
    });
}

bool Network::Impl::sparse_only_matrix(int wi) const {
    for (const GraphEdge& w : graph.edges) {
        if (w.owner == wi && !graph.layers[w.source].is_input()) return false;
    }
    return plan.edges[wi].split == engine::Split::kNone;
}

void Network::Impl::choose_kept(const LoadOptions& load) {
    params.edges.resize(graph.edges.size());
    if (load.bf16_input_weights && load.drop_input_weights) {
        throw Error(ErrorCategory::kUsage,
                    "LoadOptions: bf16_input_weights and drop_input_weights exclude each other");
    }
    if (load.drop_input_weights) {
        for (size_t wi = 0; wi < graph.edges.size(); ++wi) {
            if (graph.edges[wi].owner == int(wi) && sparse_only_matrix(int(wi)))
                params.edges[wi].kept = engine::Kept::kNothing;
        }
    }
    if (load.bf16_input_weights) {
        if (backend->name() != "cpu") {
            throw Error(ErrorCategory::kUsage,
                        "keeping the input layer's weights in BF16 needs the CPU backend; the "
                        "network runs on '" +
                            backend->name() + "'");
        }
        for (size_t wi = 0; wi < graph.edges.size(); ++wi) {
            if (graph.edges[wi].owner == int(wi) && sparse_only_matrix(int(wi)))
                params.edges[wi].kept = engine::Kept::kBf16Only;
        }
    }
    if (load.release_output && !plan.split()) {
        // The layer a Recommender ranks (its find_output): by name, else the first Output layer.
        for (size_t l = 0; l < graph.layers.size(); ++l) {
            const GraphLayer& layer = graph.layers[l];
            if (load.output_layer.empty() ? !layer.is_output()
                                          : layer.config.name != load.output_layer)
                continue;
            // What release_output_matrix frees: one source edge owning a matrix nothing else uses.
            if (layer.is_input() || layer.in_weights.size() != 1) break;
            const int wi = layer.in_weights[0];
            const GraphEdge& edge = graph.edges[size_t(wi)];
            if (edge.owner != wi || edge.users != 1) break;
            params.edges[size_t(wi)].kept = engine::Kept::kNothing;
            params.released_output = int(l);
            break;
        }
    }
    for (const engine::EdgeParams& m : params.edges) {
        if (m.kept != engine::Kept::kFp32) params.bf16_only = true;  // an inference network
    }
}

void Network::Impl::restore(const io::ModelReader& file, bool with_state) {
    catch_up.pending = false;  // every row is overwritten: current as of the file's steps
    const io::ModelLayout& model = file.layout();
    const std::string& path = file.path();
    graph.feature_names = model.feature_names;
    params.fits_pending = false;  // fixed matrices come from the file
    if (model.weights.size() != graph.edges.size()) {
        throw Error(ErrorCategory::kIo,
                    path + ": the model file holds " + std::to_string(model.weights.size()) +
                        " weight matrices; its config needs " + std::to_string(graph.edges.size()));
    }
    // Slots to read: those the optimizer allocated (ensure_optimizer_state).
    const int slots = with_state ? formulas::optimizer_state_slots(params.state_kind) : 0;
    auto check_slots = [&](int held, const std::string& name) {
        if (held >= slots) return;
        throw Error(ErrorCategory::kIo, path + ": " + name + " has " + std::to_string(held) +
                                            " optimizer state slots in the file; expected " +
                                            std::to_string(slots));
    };
    // The output matrix a streamed load does not keep (LoadOptions::release_output): its
    // fingerprint from the rows as they are read, the bias last.
    std::optional<engine::OutputFingerprint> released;
    int released_edge = -1;
    if (params.released_output >= 0) {
        const GraphLayer& layer = graph.layers[size_t(params.released_output)];
        released_edge = layer.in_weights[0];
        const GraphEdge& edge = graph.edges[size_t(released_edge)];
        released.emplace(edge.cols, edge.rows, edge.transposed, layer.activation.kind);
    }
    // The config restores the ties; the file's bShared entries must agree with it, and only
    // the matrices that own their values carry them.
    for (size_t i = 0; i < model.weights.size(); ++i) {
        const io::ModelLayout::Weight& mw = model.weights[i];
        const GraphEdge& w = graph.edges[i];
        const std::string name = "weight:" + mw.input_layer + "->" + mw.output_layer;
        const GraphEdge& owner = graph.edges[w.owner];
        const bool shared = w.owner != static_cast<int>(i);
        const bool agrees =
            weight_name(w) == name && mw.shared == shared &&
            (!shared || (mw.transposed == w.transposed &&
                         mw.source_input_layer == graph.layers[owner.source].config.name &&
                         mw.source_output_layer == graph.layers[owner.destination].config.name));
        if (!agrees) {
            throw Error(ErrorCategory::kIo, path + ": weight" + std::to_string(i) + " (" +
                                                mw.input_layer + " -> " + mw.output_layer +
                                                ") does not match the edge or the weight sharing "
                                                "of the model's config");
        }
        if (shared) continue;
        const bool fixed = graph.edges[i].fixed;  // a fixed matrix has no optimizer state
        if (!fixed) check_slots(mw.state_slots, name);
        engine::EdgeParams& matrix = params.edges[i];
        const engine::EdgeSplit& mine = plan.edges[i];
        if (matrix.kept == engine::Kept::kBf16Only) {  // each chunk rounded into the copy
            std::vector<uint16_t> rows;
            read_weight_chunks(file, int(i), io::ModelSlot(0),
                               [&](uint64_t first, uint64_t count, const float* values) {
                                   rows.assign(count * mine.ld, 0);  // zeros in the padding
                                   for (size_t r = 0; r < count; ++r)
                                       for (size_t j = 0; j < mine.local_cols; ++j)
                                           rows[r * mine.ld + j] =
                                               formulas::bf16_bits(values[r * mine.local_cols + j]);
                                   backend->upload(matrix.w_bf16.data() + first * mine.ld,
                                                   rows.data(), rows.size() * sizeof(uint16_t));
                               });
            continue;
        }
        if (matrix.kept == engine::Kept::kNothing) {
            if (!released || int(i) != released_edge) continue;  // dropped: never read
            // The released output matrix: fingerprinted on the way, handed on, not kept.
            const auto& sink = options.load.output_rows;
            read_weight_chunks(file, int(i), io::ModelSlot(0),
                               [&](uint64_t first, uint64_t count, const float* values) {
                                   released->add_rows(values, count, mine.local_cols,
                                                      mine.local_cols);
                                   if (sink)
                                       sink(first, count, mine.local_rows, mine.local_cols, values);
                               });
            continue;
        }
        for (int s = 0; s <= (fixed ? 0 : slots); ++s) {
            read_weight_block(file, int(i), io::ModelSlot(s), weight_slot(matrix, s));
        }
    }
    for (size_t j = 0; j < model.biases.size(); ++j) {
        const io::ModelLayout::Bias& b = model.biases[j];
        bool is_bias = false;
        const int l = find_parameter("bias:" + b.layer, &is_bias);
        engine::LayerParams& bias = params.layers[l];
        const engine::LayerBand& band = plan.layers[l];
        check_slots(b.state_slots, "bias:" + b.layer);
        std::vector<float> host(band.n_local);
        for (int s = 0; s <= slots; ++s) {
            file.read_bias(j, io::ModelSlot(s), band.offset, band.n_local, host.data());
            bias_slot(bias, s).upload(host.data(), host.size());
        }
        if (l == params.released_output)
            params.released_fingerprint = released->finish(host.data(), host.size());
    }
    sync_bf16_copies();  // the file holds the FP32 masters: their copies are rounded here
}

}  // namespace sparsenet
