#include "io/model_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <type_traits>

#include "common/resources.h"
#include "io/names_variable.h"
#include "io/netcdf_header_check.h"
#include "io/netcdf_util.h"
#include "sparsenet/error.h"

namespace sparsenet::io {
namespace {

constexpr int kFormatVersion = 1;

void put_text(int nc, const std::string& path, const std::string& name, const std::string& v) {
    nc_check(nc_put_att_text(nc, NC_GLOBAL, name.c_str(), v.size(), v.c_str()), path,
             "writing attribute " + name);
}

void put_int(int nc, const std::string& path, const std::string& name, int v) {
    nc_check(nc_put_att_int(nc, NC_GLOBAL, name.c_str(), NC_INT, 1, &v), path,
             "writing attribute " + name);
}

std::string get_text(int nc, const std::string& path, const std::string& name) {
    size_t len = 0;
    nc_type type;
    int status = nc_inq_att(nc, NC_GLOBAL, name.c_str(), &type, &len);
    if (status == NC_ENOTATT) {
        throw Error(ErrorCategory::kIo,
                    path + ": not a sparsenet model file: attribute '" + name + "' is missing");
    }
    nc_check(status, path, "reading attribute " + name);
    if (type != NC_CHAR) {
        throw Error(ErrorCategory::kIo, path + ": attribute '" + name + "' is not text");
    }
    std::string v(len, '\0');
    nc_check(nc_get_att_text(nc, NC_GLOBAL, name.c_str(), v.data()), path,
             "reading attribute " + name);
    return v;
}

int get_int(int nc, const std::string& path, const std::string& name) {
    int v = 0;
    const int status = nc_get_att_int(nc, NC_GLOBAL, name.c_str(), &v);
    if (status == NC_ENOTATT) {
        throw Error(ErrorCategory::kIo,
                    path + ": not a sparsenet model file: attribute '" + name + "' is missing");
    }
    nc_check(status, path, "reading attribute " + name);
    return v;
}

void put_int64(int nc, const std::string& path, const std::string& name, uint64_t v) {
    const long long value = static_cast<long long>(v);
    nc_check(nc_put_att_longlong(nc, NC_GLOBAL, name.c_str(), NC_INT64, 1, &value), path,
             "writing attribute " + name);
}

void put_double(int nc, const std::string& path, const std::string& name, double v) {
    nc_check(nc_put_att_double(nc, NC_GLOBAL, name.c_str(), NC_DOUBLE, 1, &v), path,
             "writing attribute " + name);
}

// One numeric global attribute of one value (checkpoints).
template <typename T>
T get_number(int nc, const std::string& path, const std::string& name) {
    nc_type type;
    size_t len = 0;
    const int status = nc_inq_att(nc, NC_GLOBAL, name.c_str(), &type, &len);
    if (status == NC_ENOTATT) {
        throw Error(ErrorCategory::kIo,
                    path + ": not a sparsenet checkpoint: attribute '" + name + "' is missing");
    }
    nc_check(status, path, "reading attribute " + name);
    if (len != 1 || type == NC_CHAR || type == NC_STRING) {
        throw Error(ErrorCategory::kIo,
                    path + ": checkpoint attribute '" + name + "' is not one number");
    }
    if constexpr (std::is_same_v<T, double>) {
        double v = 0;
        nc_check(nc_get_att_double(nc, NC_GLOBAL, name.c_str(), &v), path, "reading " + name);
        return v;
    } else {
        long long v = 0;
        nc_check(nc_get_att_longlong(nc, NC_GLOBAL, name.c_str(), &v), path, "reading " + name);
        if (v < 0) {
            throw Error(ErrorCategory::kIo, path + ": checkpoint attribute '" + name +
                                                "' is negative: " + std::to_string(v));
        }
        return static_cast<T>(v);
    }
}

constexpr int kCheckpointVersion = 1;
constexpr const char* kNotePrefix = "checkpoint_note_";

// The variable of a weight's or a bias's slot: weight<i>_weights, weight<i>_state1, bias<j>,
// bias<j>_state2.
std::string weight_variable(size_t i, ModelSlot slot) {
    const std::string prefix = "weight" + std::to_string(i);
    return slot == ModelSlot::kValues ? prefix + "_weights"
                                      : prefix + "_state" + std::to_string(int(slot));
}

std::string bias_variable(size_t i, ModelSlot slot) {
    const std::string prefix = "bias" + std::to_string(i);
    return slot == ModelSlot::kValues ? prefix : prefix + "_state" + std::to_string(int(slot));
}

std::string shape_text(const std::vector<uint64_t>& shape) {
    std::string s;
    for (uint64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
    return "[" + s + "]";
}

// The layout write_model defines for a whole model: every value vector as it is.
ModelLayout layout_of(const ModelFile& model) {
    ModelLayout layout;
    layout.config = model.config;
    layout.feature_names = model.feature_names;
    layout.training = model.training;
    auto slots = [](const std::vector<float>& state1, const std::vector<float>& state2) {
        return !state2.empty() ? 2 : !state1.empty() ? 1 : 0;
    };
    for (const ModelWeight& w : model.weights) {
        layout.weights.push_back({w.input_layer, w.output_layer, w.rows, w.cols, w.shared,
                                  w.transposed, w.source_input_layer, w.source_output_layer,
                                  w.shared ? 0 : slots(w.state1, w.state2)});
    }
    for (const ModelBias& b : model.biases) {
        layout.biases.push_back({b.layer, b.values.size(), slots(b.state1, b.state2)});
    }
    return layout;
}

}  // namespace

// Atomic replacement: the model goes to a uniquely named temporary file in the directory of
// `path`, is fsync'ed, renamed over `path`, and the directory is fsync'ed. Readers (a serving
// process reloading the model) see the old file or the new one, never a partial one, and a
// failure at any step leaves the old file untouched and no temporary file behind.
ModelWriter::ModelWriter(const std::string& path, const ModelLayout& layout) : path_(path) {
    // pid + a process-wide counter: concurrent saves (threads or processes) never share a name.
    static std::atomic<uint64_t> counter{0};
    tmp_ = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
    try {
        nc_check(nc_create(tmp_.c_str(), NC_NETCDF4 | NC_CLOBBER, &nc_), tmp_, "creating");
        define(layout);
    } catch (const Error& e) {
        fail(e);
    } catch (...) {
        close_and_remove();
        throw;
    }
}

ModelWriter::~ModelWriter() {
    if (!committed_) close_and_remove();
}

void ModelWriter::close_and_remove() {
    if (nc_ >= 0) nc_close(nc_);
    nc_ = -1;
    std::remove(tmp_.c_str());
}

void ModelWriter::fail(const Error& error) {
    close_and_remove();
    // The previous file is untouched; a full disk or a file size limit is the usual cause.
    throw Error(error.category(), "cannot save the model to " + path_ +
                                      " (a previous file of that name is left as it was): " +
                                      error.what() + storage_hint(path_));
}

// The attributes, dimensions and variables in the order the format has always had them.
void ModelWriter::define(const ModelLayout& layout) {
    const int nc = nc_;
    const std::string& tmp = tmp_;
    put_int(nc, tmp, "sparsenet_model_format", kFormatVersion);
    put_text(nc, tmp, "config", layout.config.to_json());
    put_text(nc, tmp, "name", layout.config.name);
    put_int(nc, tmp, "layers", static_cast<int>(layout.config.layers.size()));
    for (size_t i = 0; i < layout.config.layers.size(); ++i) {
        put_text(nc, tmp, "layer" + std::to_string(i) + "_name", layout.config.layers[i].name);
    }
    put_int(nc, tmp, "weights", static_cast<int>(layout.weights.size()));
    if (layout.training) {
        const ModelTrainingState& t = *layout.training;
        put_int(nc, tmp, "sparsenet_checkpoint_format", kCheckpointVersion);
        put_text(nc, tmp, "checkpoint_optimizer", t.optimizer);
        put_int64(nc, tmp, "checkpoint_optimizer_steps", t.optimizer_steps);
        put_int64(nc, tmp, "checkpoint_epochs_complete", t.epochs_complete);
        put_int64(nc, tmp, "checkpoint_batches_done", t.batches_done);
        put_double(nc, tmp, "checkpoint_loss_sum", t.loss_sum);
        put_text(nc, tmp, "checkpoint_options", t.options);
        int slots = 0;
        for (const ModelLayout::Weight& w : layout.weights) slots = std::max(slots, w.state_slots);
        for (const ModelLayout::Bias& b : layout.biases) slots = std::max(slots, b.state_slots);
        put_int(nc, tmp, "checkpoint_state_slots", slots);
        for (const auto& [key, value] : t.notes) put_text(nc, tmp, kNotePrefix + key, value);
    }
    weights_.assign(layout.weights.size(), {});
    for (size_t i = 0; i < layout.weights.size(); ++i) {
        const ModelLayout::Weight& w = layout.weights[i];
        const std::string prefix = "weight" + std::to_string(i);
        put_text(nc, tmp, prefix + "_inputLayer", w.input_layer);
        put_text(nc, tmp, prefix + "_outputLayer", w.output_layer);
        put_int(nc, tmp, prefix + "_bShared", w.shared ? 1 : 0);
        if (w.shared) {
            put_text(nc, tmp, prefix + "_sourceInputLayer", w.source_input_layer);
            put_text(nc, tmp, prefix + "_sourceOutputLayer", w.source_output_layer);
            put_int(nc, tmp, prefix + "_bTransposed", w.transposed ? 1 : 0);
            continue;  // the matrix is stored with its owner
        }
        int dims[2];
        nc_check(nc_def_dim(nc, (prefix + "_height").c_str(), w.rows, &dims[0]), tmp,
                 "defining " + prefix);
        nc_check(nc_def_dim(nc, (prefix + "_width").c_str(), w.cols, &dims[1]), tmp,
                 "defining " + prefix);
        for (int s = 0; s <= w.state_slots; ++s) {
            Variable& v = weights_[i][s];
            v.name = weight_variable(i, ModelSlot(s));
            v.rows = w.rows;
            v.cols = w.cols;
            nc_check(nc_def_var(nc, v.name.c_str(), NC_FLOAT, 2, dims, &v.id), tmp,
                     "defining " + v.name);
        }
    }
    biases_.assign(layout.biases.size(), {});
    for (size_t i = 0; i < layout.biases.size(); ++i) {
        const ModelLayout::Bias& b = layout.biases[i];
        const std::string var = bias_variable(i, ModelSlot::kValues);
        put_text(nc, tmp, var + "_layer", b.layer);
        int dim = 0;
        nc_check(nc_def_dim(nc, (var + "_dim").c_str(), b.units, &dim), tmp, "defining " + var);
        for (int s = 0; s <= b.state_slots; ++s) {
            Variable& v = biases_[i][s];
            v.name = bias_variable(i, ModelSlot(s));
            v.rows = 1;
            v.cols = b.units;
            nc_check(nc_def_var(nc, v.name.c_str(), NC_FLOAT, 1, &dim, &v.id), tmp,
                     "defining " + v.name);
        }
    }
    std::vector<std::pair<int, const std::vector<std::string>*>> names;
    for (size_t i = 0; i < layout.config.layers.size(); ++i) {
        const auto it = layout.feature_names.find(layout.config.layers[i].name);
        if (it == layout.feature_names.end() || it->second.empty()) continue;
        names.emplace_back(
            define_names(nc, tmp, "layer" + std::to_string(i) + "_featureNames", it->second),
            &it->second);
    }
    nc_check(nc_enddef(nc), tmp, "finishing the header");
    for (const auto& [id, labels] : names) put_names(nc, tmp, id, *labels);
}

ModelWriter::Variable& ModelWriter::variable(std::vector<std::array<Variable, 3>>& all,
                                             size_t index, ModelSlot slot, const char* kind) {
    if (index >= all.size() || all[index][int(slot)].id < 0) {
        throw Error(ErrorCategory::kInternal, tmp_ + ": the layout has no variable for " + kind +
                                                  " " + std::to_string(index) + ", slot " +
                                                  std::to_string(int(slot)));
    }
    return all[index][int(slot)];
}

void ModelWriter::write_rows(size_t weight, ModelSlot slot, uint64_t first_row, uint64_t rows,
                             const float* values) {
    try {
        Variable& v = variable(weights_, weight, slot, "weight");
        if (first_row + rows > v.rows) {
            throw Error(ErrorCategory::kInternal, tmp_ + ": rows [" + std::to_string(first_row) +
                                                      ", " + std::to_string(first_row + rows) +
                                                      ") of " + v.name + " are past its " +
                                                      std::to_string(v.rows) + " rows");
        }
        if (rows == 0) return;
        const size_t start[2] = {size_t(first_row), 0};
        const size_t count[2] = {size_t(rows), size_t(v.cols)};
        nc_check(nc_put_vara_float(nc_, v.id, start, count, values), tmp_, "writing " + v.name);
        v.written += rows;
    } catch (const Error& e) {
        fail(e);
    }
}

void ModelWriter::write_bias(size_t bias, ModelSlot slot, const float* values) {
    try {
        Variable& v = variable(biases_, bias, slot, "bias");
        nc_check(nc_put_var_float(nc_, v.id, values), tmp_, "writing " + v.name);
        v.written = 1;
    } catch (const Error& e) {
        fail(e);
    }
}

void ModelWriter::commit() {
    try {
        for (const auto* all : {&weights_, &biases_}) {
            for (const std::array<Variable, 3>& slots : *all) {
                for (const Variable& v : slots) {
                    if (v.id < 0 || v.written == v.rows) continue;
                    throw Error(ErrorCategory::kInternal,
                                tmp_ + ": " + std::to_string(v.written) + " of the " +
                                    std::to_string(v.rows) + " rows of " + v.name +
                                    " were written; expected every row once");
                }
            }
        }
        const int status = nc_close(nc_);
        nc_ = -1;
        nc_check(status, tmp_, "closing");
        if (!sync_path(tmp_, false)) {
            throw Error(ErrorCategory::kIo,
                        tmp_ + ": cannot flush to disk (fsync): " + std::strerror(errno));
        }
    } catch (const Error& e) {
        fail(e);
    }
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) {
        close_and_remove();
        throw Error(ErrorCategory::kIo, path_ + ": cannot replace the model file: " + ec.message());
    }
    committed_ = true;
    // The rename is durable once the directory entry is (a file system that cannot sync a
    // directory: the rename is then as durable as it gets).
    if (!sync_parent_directory(path_)) {
        throw Error(ErrorCategory::kIo, path_ +
                                            ": the model file was replaced but its directory "
                                            "could not be flushed to disk (fsync): " +
                                            std::strerror(errno));
    }
}

void write_model(const std::string& path, const ModelFile& model) {
    // The writer takes pointers: every vector must hold the values its variable has.
    auto check = [&](const std::vector<float>& v, uint64_t expected, const std::string& what) {
        if (v.size() == expected) return;
        throw Error(ErrorCategory::kUsage, "cannot save the model to " + path + ": " + what +
                                               " has " + std::to_string(v.size()) +
                                               " values; expected " + std::to_string(expected));
    };
    for (const ModelWeight& w : model.weights) {
        if (w.shared) continue;
        const std::string what = "weight " + w.input_layer + " -> " + w.output_layer;
        check(w.values, w.rows * w.cols, what);
        if (!w.state1.empty()) check(w.state1, w.rows * w.cols, what + " (state1)");
        if (!w.state2.empty()) check(w.state2, w.rows * w.cols, what + " (state2)");
    }
    for (const ModelBias& b : model.biases) {
        if (!b.state1.empty()) check(b.state1, b.values.size(), "bias " + b.layer + " (state1)");
        if (!b.state2.empty()) check(b.state2, b.values.size(), "bias " + b.layer + " (state2)");
    }
    ModelWriter writer(path, layout_of(model));
    for (size_t i = 0; i < model.weights.size(); ++i) {
        const ModelWeight& w = model.weights[i];
        if (w.shared) continue;
        writer.write_rows(i, ModelSlot::kValues, 0, w.rows, w.values.data());
        if (!w.state1.empty()) writer.write_rows(i, ModelSlot::kState1, 0, w.rows, w.state1.data());
        if (!w.state2.empty()) writer.write_rows(i, ModelSlot::kState2, 0, w.rows, w.state2.data());
    }
    for (size_t i = 0; i < model.biases.size(); ++i) {
        const ModelBias& b = model.biases[i];
        writer.write_bias(i, ModelSlot::kValues, b.values.data());
        if (!b.state1.empty()) writer.write_bias(i, ModelSlot::kState1, b.state1.data());
        if (!b.state2.empty()) writer.write_bias(i, ModelSlot::kState2, b.state2.data());
    }
    writer.commit();
}

bool is_model_file(const std::string& path) {
    NcFile file;
    check_netcdf_header(path);
    const int status = nc_open(path.c_str(), NC_NOWRITE, file.out());
    nc_check(status, path,
             status == NC_ENOTNC || status == NC_EHDFERR
                 ? "cannot open (not a netCDF file, or truncated or corrupt)"
                 : "cannot open");
    nc_type type;
    size_t len = 0;
    return nc_inq_att(file.id(), NC_GLOBAL, "sparsenet_model_format", &type, &len) == NC_NOERR;
}

ModelReader::ModelReader(const std::string& path, bool training_state) : path_(path) {
    if (!std::filesystem::exists(path)) {
        throw Error(ErrorCategory::kIo, path + ": model file not found");
    }
    check_netcdf_header(path);
    nc_check(nc_open(path.c_str(), NC_NOWRITE, &nc_), path, "opening the model file");
    try {
        const int format = get_int(nc_, path, "sparsenet_model_format");
        if (format != kFormatVersion) {
            throw Error(ErrorCategory::kIo, path + ": model format " + std::to_string(format) +
                                                " is not supported; expected " +
                                                std::to_string(kFormatVersion));
        }
        layout_.config =
            NetworkConfig::from_json(get_text(nc_, path, "config"), path + " (config)");
        const int slots = read_training_state(training_state);
        read_weights(slots);
        read_biases(slots);
        read_feature_names();
    } catch (...) {
        nc_close(nc_);
        throw;
    }
}

// Each layer's unit names, when the file has them (files written before they existed have none).
void ModelReader::read_feature_names() {
    const std::vector<LayerConfig>& layers = layout_.config.layers;
    for (size_t i = 0; i < layers.size(); ++i) {
        const std::string var = "layer" + std::to_string(i) + "_featureNames";
        auto names = read_names(nc_, path_, var);
        if (!names) continue;
        if (names->size() > layers[i].n) {
            throw Error(ErrorCategory::kIo, path_ + ": variable '" + var + "' names " +
                                                std::to_string(names->size()) +
                                                " features; layer '" + layers[i].name + "' has " +
                                                std::to_string(layers[i].n) + " units");
        }
        layout_.feature_names[layers[i].name] = std::move(*names);
    }
}

ModelReader::~ModelReader() {
    nc_close(nc_);
}

// The checkpoint's position, options and notes; the optimizer state slots to read (0 unless
// training_state).
int ModelReader::read_training_state(bool training_state) {
    const int nc = nc_;
    const std::string& path = path_;
    nc_type checkpoint_type;
    size_t checkpoint_len = 0;
    const bool checkpoint = nc_inq_att(nc, NC_GLOBAL, "sparsenet_checkpoint_format",
                                       &checkpoint_type, &checkpoint_len) == NC_NOERR;
    if (!training_state && !checkpoint) return 0;
    if (!checkpoint) {
        throw Error(ErrorCategory::kIo, path +
                                            ": not a checkpoint (a model file without training "
                                            "state: attribute 'sparsenet_checkpoint_format' is "
                                            "missing)");
    }
    const int version = get_int(nc, path, "sparsenet_checkpoint_format");
    if (version != kCheckpointVersion) {
        throw Error(ErrorCategory::kIo, path + ": checkpoint format " + std::to_string(version) +
                                            " is not supported; expected " +
                                            std::to_string(kCheckpointVersion));
    }
    ModelTrainingState t;
    t.optimizer = get_text(nc, path, "checkpoint_optimizer");
    t.optimizer_steps = get_number<uint64_t>(nc, path, "checkpoint_optimizer_steps");
    t.epochs_complete = static_cast<uint32_t>(std::min<uint64_t>(
        get_number<uint64_t>(nc, path, "checkpoint_epochs_complete"), UINT32_MAX));
    t.batches_done = get_number<uint64_t>(nc, path, "checkpoint_batches_done");
    t.loss_sum = get_number<double>(nc, path, "checkpoint_loss_sum");
    t.options = get_text(nc, path, "checkpoint_options");
    int natts = 0;
    nc_check(nc_inq_natts(nc, &natts), path, "listing attributes");
    const std::string prefix = kNotePrefix;
    for (int a = 0; a < natts; ++a) {
        char name[NC_MAX_NAME + 1] = {};
        nc_check(nc_inq_attname(nc, NC_GLOBAL, a, name), path, "listing attributes");
        const std::string n = name;
        if (n.compare(0, prefix.size(), prefix) == 0) {
            t.notes[n.substr(prefix.size())] = get_text(nc, path, n);
        }
    }
    const int declared = get_int(nc, path, "checkpoint_state_slots");
    if (declared < 0 || declared > 2) {
        throw Error(ErrorCategory::kIo, path + ": checkpoint_state_slots = " +
                                            std::to_string(declared) + "; expected 0, 1 or 2");
    }
    layout_.training = std::move(t);
    return training_state ? declared : 0;
}

// The id of variable `name`, which must have the dimensions `shape` (`whose`: what in the config
// gives them, for the message).
int ModelReader::find_variable(const std::string& name, const std::vector<uint64_t>& shape,
                               const std::string& whose) const {
    int id = 0;
    const int status = nc_inq_varid(nc_, name.c_str(), &id);
    if (status == NC_ENOTVAR) {
        throw Error(ErrorCategory::kIo, path_ + ": model variable '" + name + "' is missing");
    }
    nc_check(status, path_, "finding " + name);
    int ndims = 0;
    nc_check(nc_inq_varndims(nc_, id, &ndims), path_, "inspecting " + name);
    std::vector<int> dims(std::max(ndims, 0));
    if (ndims > 0) nc_check(nc_inq_vardimid(nc_, id, dims.data()), path_, "inspecting " + name);
    std::vector<uint64_t> actual;
    for (int d : dims) {
        size_t len = 0;
        nc_check(nc_inq_dimlen(nc_, d, &len), path_, "inspecting " + name);
        actual.push_back(len);
    }
    if (actual != shape) {
        throw Error(ErrorCategory::kIo, path_ + ": model variable '" + name + "' has shape " +
                                            shape_text(actual) + "; expected " + shape_text(shape) +
                                            " (" + whose + ")");
    }
    return id;
}

void ModelReader::read_weights(int slots) {
    const int nc = nc_;
    const std::string& path = path_;
    const int weights = get_int(nc, path, "weights");
    for (int i = 0; i < weights; ++i) {
        const std::string prefix = "weight" + std::to_string(i);
        ModelLayout::Weight w;
        w.input_layer = get_text(nc, path, prefix + "_inputLayer");
        w.output_layer = get_text(nc, path, prefix + "_outputLayer");
        const LayerConfig* in = layout_.config.find_layer(w.input_layer);
        const LayerConfig* out = layout_.config.find_layer(w.output_layer);
        if (in == nullptr || out == nullptr) {
            throw Error(ErrorCategory::kIo, path + ": " + prefix +
                                                " connects layers that the config lacks: " +
                                                w.input_layer + " -> " + w.output_layer);
        }
        w.rows = in->n;
        w.cols = out->n;
        nc_type type;
        size_t len = 0;
        if (nc_inq_att(nc, NC_GLOBAL, (prefix + "_bShared").c_str(), &type, &len) == NC_NOERR) {
            w.shared = get_int(nc, path, prefix + "_bShared") != 0;
        }
        std::array<int, 3> ids = {-1, -1, -1};
        if (w.shared) {
            w.source_input_layer = get_text(nc, path, prefix + "_sourceInputLayer");
            w.source_output_layer = get_text(nc, path, prefix + "_sourceOutputLayer");
            w.transposed = get_int(nc, path, prefix + "_bTransposed") != 0;
        } else {
            // A fixed matrix (FixedWeights) is never trained: no optimizer state in checkpoints.
            bool fixed = false;
            for (const FixedWeights& fw : out->fixed_weights)
                fixed = fixed || fw.source == in->name;
            w.state_slots = fixed ? 0 : slots;
            const std::string whose = "the sizes of layers '" + w.input_layer + "' -> '" +
                                      w.output_layer + "' in the file's config";
            for (int s = 0; s <= w.state_slots; ++s) {
                ids[s] = find_variable(weight_variable(size_t(i), ModelSlot(s)), {w.rows, w.cols},
                                       whose);
            }
        }
        layout_.weights.push_back(std::move(w));
        weight_vars_.push_back(ids);
    }
}

void ModelReader::read_biases(int slots) {
    for (size_t i = 0;; ++i) {
        const std::string var = bias_variable(i, ModelSlot::kValues);
        nc_type type;
        size_t len = 0;
        if (nc_inq_att(nc_, NC_GLOBAL, (var + "_layer").c_str(), &type, &len) != NC_NOERR) break;
        ModelLayout::Bias b;
        b.layer = get_text(nc_, path_, var + "_layer");
        const LayerConfig* layer = layout_.config.find_layer(b.layer);
        if (layer == nullptr) {
            throw Error(ErrorCategory::kIo,
                        path_ + ": " + var + " belongs to unknown layer '" + b.layer + "'");
        }
        b.units = layer->n;
        b.state_slots = slots;
        std::array<int, 3> ids = {-1, -1, -1};
        const std::string whose = "the size of layer '" + b.layer + "' in the file's config";
        for (int s = 0; s <= slots; ++s) {
            ids[s] = find_variable(bias_variable(i, ModelSlot(s)), {b.units}, whose);
        }
        layout_.biases.push_back(std::move(b));
        bias_vars_.push_back(ids);
    }
}

int ModelReader::variable_id(const std::vector<std::array<int, 3>>& all, size_t index,
                             ModelSlot slot, const std::string& name) const {
    if (index >= all.size() || all[index][int(slot)] < 0) {
        throw Error(ErrorCategory::kInternal,
                    path_ + ": variable " + name + " is not part of the layout read");
    }
    return all[index][int(slot)];
}

void ModelReader::read_block(size_t weight, ModelSlot slot, uint64_t first_row, uint64_t rows,
                             uint64_t first_col, uint64_t cols, float* out) const {
    const std::string name = weight_variable(weight, slot);
    const int id = variable_id(weight_vars_, weight, slot, name);
    if (rows == 0 || cols == 0) return;
    const size_t start[2] = {size_t(first_row), size_t(first_col)};
    const size_t count[2] = {size_t(rows), size_t(cols)};
    nc_check(nc_get_vara_float(nc_, id, start, count, out), path_,
             "reading rows [" + std::to_string(first_row) + ", " +
                 std::to_string(first_row + rows) + ") x columns [" + std::to_string(first_col) +
                 ", " + std::to_string(first_col + cols) + ") of " + name);
}

void ModelReader::read_bias(size_t bias, ModelSlot slot, uint64_t first, uint64_t count,
                            float* out) const {
    const std::string name = bias_variable(bias, slot);
    const int id = variable_id(bias_vars_, bias, slot, name);
    if (count == 0) return;
    const size_t start[1] = {size_t(first)};
    const size_t counts[1] = {size_t(count)};
    nc_check(nc_get_vara_float(nc_, id, start, counts, out), path_,
             "reading units [" + std::to_string(first) + ", " + std::to_string(first + count) +
                 ") of " + name);
}

ModelFile read_model(const std::string& path, bool training_state) {
    const ModelReader reader(path, training_state);
    const ModelLayout& layout = reader.layout();
    ModelFile model;
    model.config = layout.config;
    model.feature_names = layout.feature_names;
    model.training = layout.training;
    for (size_t i = 0; i < layout.weights.size(); ++i) {
        const ModelLayout::Weight& l = layout.weights[i];
        ModelWeight w;
        w.input_layer = l.input_layer;
        w.output_layer = l.output_layer;
        w.rows = l.rows;
        w.cols = l.cols;
        w.shared = l.shared;
        w.transposed = l.transposed;
        w.source_input_layer = l.source_input_layer;
        w.source_output_layer = l.source_output_layer;
        if (!l.shared) {
            for (int s = 0; s <= l.state_slots; ++s) {
                std::vector<float>& v = s == 0 ? w.values : s == 1 ? w.state1 : w.state2;
                v.resize(l.rows * l.cols);
                reader.read_block(i, ModelSlot(s), 0, l.rows, 0, l.cols, v.data());
            }
        }
        model.weights.push_back(std::move(w));
    }
    for (size_t i = 0; i < layout.biases.size(); ++i) {
        const ModelLayout::Bias& l = layout.biases[i];
        ModelBias b;
        b.layer = l.layer;
        for (int s = 0; s <= l.state_slots; ++s) {
            std::vector<float>& v = s == 0 ? b.values : s == 1 ? b.state1 : b.state2;
            v.resize(l.units);
            reader.read_bias(i, ModelSlot(s), 0, l.units, v.data());
        }
        model.biases.push_back(std::move(b));
    }
    return model;
}

}  // namespace sparsenet::io
