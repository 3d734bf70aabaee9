// The public description of a model file (include/sparsenet/model_info.h): its layout as
// io::ModelReader reads it, values left unread.
#include "sparsenet/model_info.h"

#include "io/model_file.h"

namespace sparsenet {

bool is_model_file(const std::string& path) {
    return io::is_model_file(path);
}

ModelInfo read_model_info(const std::string& path) {
    const io::ModelReader reader(path);
    const io::ModelLayout& layout = reader.layout();
    ModelInfo info;
    info.config = layout.config;
    for (const io::ModelLayout::Weight& l : layout.weights) {
        ModelInfo::Weight w;
        w.from = l.input_layer;
        w.to = l.output_layer;
        w.rows = l.rows;
        w.cols = l.cols;
        w.shared = l.shared;
        w.transposed = l.transposed;
        if (l.shared) {
            w.shares_from = l.source_input_layer;
            w.shares_to = l.source_output_layer;
        } else {
            info.parameters += l.rows * l.cols;
        }
        info.weights.push_back(w);
    }
    for (const io::ModelLayout::Bias& l : layout.biases) {
        info.biases.push_back({l.layer, l.units});
        info.parameters += l.units;
    }
    for (const auto& [layer, names] : layout.feature_names)
        info.feature_names[layer] = names.size();
    if (layout.training) {
        const io::ModelTrainingState& t = *layout.training;
        ModelInfo::Checkpoint c;
        c.epochs_complete = t.epochs_complete;
        c.batches_done = t.batches_done;
        c.optimizer = t.optimizer;
        c.optimizer_steps = t.optimizer_steps;
        c.options = t.options;
        info.checkpoint = c;
    }
    return info;
}

}  // namespace sparsenet
