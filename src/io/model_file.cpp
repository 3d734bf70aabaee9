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

void define_vector(int nc, const std::string& path, const std::string& var, size_t len,
                   int* varid) {
    int dim = 0;
    nc_check(nc_def_dim(nc, (var + "_dim").c_str(), len, &dim), path, "defining " + var);
    nc_check(nc_def_var(nc, var.c_str(), NC_FLOAT, 1, &dim, varid), path, "defining " + var);
}

std::vector<float> read_vector(int nc, const std::string& path, const std::string& var,
                               size_t expected) {
    int varid = 0;
    const int status = nc_inq_varid(nc, var.c_str(), &varid);
    if (status == NC_ENOTVAR) {
        throw Error(ErrorCategory::kIo, path + ": model variable '" + var + "' is missing");
    }
    nc_check(status, path, "finding " + var);
    int ndims = 0;
    nc_check(nc_inq_varndims(nc, varid, &ndims), path, "inspecting " + var);
    size_t total = 1;
    if (ndims > 0) {
        std::vector<int> dims(ndims);
        nc_check(nc_inq_vardimid(nc, varid, dims.data()), path, "inspecting " + var);
        for (int d : dims) {
            size_t len = 0;
            nc_check(nc_inq_dimlen(nc, d, &len), path, "inspecting " + var);
            total *= len;
        }
    }
    if (total != expected) {
        throw Error(ErrorCategory::kIo, path + ": model variable '" + var + "' has " +
                                            std::to_string(total) + " values; expected " +
                                            std::to_string(expected));
    }
    std::vector<float> v(expected);
    if (expected > 0) nc_check(nc_get_var_float(nc, varid, v.data()), path, "reading " + var);
    return v;
}

}  // namespace

// Atomic replacement: the model goes to a uniquely named temporary file in the directory of
// `path`, is fsync'ed, renamed over `path`, and the directory is fsync'ed. Readers (a serving
// process reloading the model) see the old file or the new one, never a partial one, and a
// failure at any step leaves the old file untouched and no temporary file behind.
void write_model(const std::string& path, const ModelFile& model) {
    // pid + a process-wide counter: concurrent saves (threads or processes) never share a name.
    static std::atomic<uint64_t> counter{0};
    const std::string tmp =
        path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
    try {
        NcFile file;
        nc_check(nc_create(tmp.c_str(), NC_NETCDF4 | NC_CLOBBER, file.out()), tmp, "creating");
        const int nc = file.id();
        put_int(nc, tmp, "sparsenet_model_format", kFormatVersion);
        put_text(nc, tmp, "config", model.config.to_json());
        put_text(nc, tmp, "name", model.config.name);
        put_int(nc, tmp, "layers", static_cast<int>(model.config.layers.size()));
        for (size_t i = 0; i < model.config.layers.size(); ++i) {
            put_text(nc, tmp, "layer" + std::to_string(i) + "_name", model.config.layers[i].name);
        }
        put_int(nc, tmp, "weights", static_cast<int>(model.weights.size()));
        std::vector<int> weight_vars(model.weights.size()), bias_vars(model.biases.size());
        std::vector<std::array<int, 2>> state_vars(model.weights.size(), {-1, -1});
        std::vector<std::array<int, 2>> bias_state_vars(model.biases.size(), {-1, -1});
        if (model.training) {
            const ModelTrainingState& t = *model.training;
            put_int(nc, tmp, "sparsenet_checkpoint_format", kCheckpointVersion);
            put_text(nc, tmp, "checkpoint_optimizer", t.optimizer);
            put_int64(nc, tmp, "checkpoint_optimizer_steps", t.optimizer_steps);
            put_int64(nc, tmp, "checkpoint_epochs_complete", t.epochs_complete);
            put_int64(nc, tmp, "checkpoint_batches_done", t.batches_done);
            put_double(nc, tmp, "checkpoint_loss_sum", t.loss_sum);
            put_text(nc, tmp, "checkpoint_options", t.options);
            int slots = 0;
            for (const ModelWeight& w : model.weights) {
                if (!w.state1.empty()) slots = std::max(slots, 1);
                if (!w.state2.empty()) slots = 2;
            }
            for (const ModelBias& b : model.biases) {
                if (!b.state1.empty()) slots = std::max(slots, 1);
                if (!b.state2.empty()) slots = 2;
            }
            put_int(nc, tmp, "checkpoint_state_slots", slots);
            for (const auto& [key, value] : t.notes) put_text(nc, tmp, kNotePrefix + key, value);
        }
        for (size_t i = 0; i < model.weights.size(); ++i) {
            const ModelWeight& w = model.weights[i];
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
            const std::string var = prefix + "_weights";
            nc_check(nc_def_var(nc, var.c_str(), NC_FLOAT, 2, dims, &weight_vars[i]), tmp,
                     "defining " + var);
            for (int s = 0; s < 2; ++s) {
                if ((s == 0 ? w.state1 : w.state2).empty()) continue;
                const std::string state = prefix + "_state" + std::to_string(s + 1);
                nc_check(nc_def_var(nc, state.c_str(), NC_FLOAT, 2, dims, &state_vars[i][s]), tmp,
                         "defining " + state);
            }
        }
        for (size_t i = 0; i < model.biases.size(); ++i) {
            const std::string var = "bias" + std::to_string(i);
            put_text(nc, tmp, var + "_layer", model.biases[i].layer);
            define_vector(nc, tmp, var, model.biases[i].values.size(), &bias_vars[i]);
            int dim = 0;
            nc_check(nc_inq_vardimid(nc, bias_vars[i], &dim), tmp, "defining " + var);
            for (int s = 0; s < 2; ++s) {
                if ((s == 0 ? model.biases[i].state1 : model.biases[i].state2).empty()) continue;
                const std::string state = var + "_state" + std::to_string(s + 1);
                nc_check(nc_def_var(nc, state.c_str(), NC_FLOAT, 1, &dim, &bias_state_vars[i][s]),
                         tmp, "defining " + state);
            }
        }
        nc_check(nc_enddef(nc), tmp, "finishing the header");
        for (size_t i = 0; i < model.weights.size(); ++i) {
            if (model.weights[i].shared || model.weights[i].values.empty()) continue;
            nc_check(nc_put_var_float(nc, weight_vars[i], model.weights[i].values.data()), tmp,
                     "writing weight" + std::to_string(i));
            for (int s = 0; s < 2; ++s) {
                const std::vector<float>& state =
                    s == 0 ? model.weights[i].state1 : model.weights[i].state2;
                if (state.empty()) continue;
                nc_check(nc_put_var_float(nc, state_vars[i][s], state.data()), tmp,
                         "writing the optimizer state of weight" + std::to_string(i));
            }
        }
        for (size_t i = 0; i < model.biases.size(); ++i) {
            if (model.biases[i].values.empty()) continue;
            nc_check(nc_put_var_float(nc, bias_vars[i], model.biases[i].values.data()), tmp,
                     "writing bias" + std::to_string(i));
            for (int s = 0; s < 2; ++s) {
                const std::vector<float>& state =
                    s == 0 ? model.biases[i].state1 : model.biases[i].state2;
                if (state.empty()) continue;
                nc_check(nc_put_var_float(nc, bias_state_vars[i][s], state.data()), tmp,
                         "writing the optimizer state of bias" + std::to_string(i));
            }
        }
        nc_check(file.close(), tmp, "closing");
        if (!sync_path(tmp, false)) {
            throw Error(ErrorCategory::kIo,
                        tmp + ": cannot flush to disk (fsync): " + std::strerror(errno));
        }
    } catch (const Error& e) {
        std::remove(tmp.c_str());
        // The previous file is untouched; a full disk or a file size limit is the usual cause.
        throw Error(e.category(), "cannot save the model to " + path +
                                      " (a previous file of that name is left as it was): " +
                                      e.what() + storage_hint(path));
    } catch (...) {
        std::remove(tmp.c_str());
        throw;
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw Error(ErrorCategory::kIo, path + ": cannot replace the model file: " + ec.message());
    }
    // The rename is durable once the directory entry is; EINVAL: the file system cannot sync a
    // directory (the rename is then as durable as it gets).
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!sync_path(parent.empty() ? "." : parent.string(), true) && errno != EINVAL) {
        throw Error(ErrorCategory::kIo, path +
                                            ": the model file was replaced but its directory "
                                            "could not be flushed to disk (fsync): " +
                                            std::strerror(errno));
    }
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

ModelFile read_model(const std::string& path, bool training_state) {
    if (!std::filesystem::exists(path)) {
        throw Error(ErrorCategory::kIo, path + ": model file not found");
    }
    NcFile file;
    check_netcdf_header(path);
    nc_check(nc_open(path.c_str(), NC_NOWRITE, file.out()), path, "opening the model file");
    const int nc = file.id();
    const int format = get_int(nc, path, "sparsenet_model_format");
    if (format != kFormatVersion) {
        throw Error(ErrorCategory::kIo, path + ": model format " + std::to_string(format) +
                                            " is not supported; expected " +
                                            std::to_string(kFormatVersion));
    }
    ModelFile model;
    model.config = NetworkConfig::from_json(get_text(nc, path, "config"), path + " (config)");
    int slots = 0;  // optimizer state slots to read (checkpoints)
    nc_type checkpoint_type;
    size_t checkpoint_len = 0;
    const bool checkpoint = nc_inq_att(nc, NC_GLOBAL, "sparsenet_checkpoint_format",
                                       &checkpoint_type, &checkpoint_len) == NC_NOERR;
    if (training_state || checkpoint) {  // the position always; the slots when asked
        if (!checkpoint) {
            throw Error(ErrorCategory::kIo,
                        path +
                            ": not a checkpoint (a model file without training state: "
                            "attribute 'sparsenet_checkpoint_format' is missing)");
        }
        const int version = get_int(nc, path, "sparsenet_checkpoint_format");
        if (version != kCheckpointVersion) {
            throw Error(ErrorCategory::kIo,
                        path + ": checkpoint format " + std::to_string(version) +
                            " is not supported; expected " + std::to_string(kCheckpointVersion));
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
        slots = training_state ? declared : 0;
        model.training = std::move(t);
    }
    const int weights = get_int(nc, path, "weights");
    for (int i = 0; i < weights; ++i) {
        const std::string prefix = "weight" + std::to_string(i);
        ModelWeight w;
        w.input_layer = get_text(nc, path, prefix + "_inputLayer");
        w.output_layer = get_text(nc, path, prefix + "_outputLayer");
        const LayerConfig* in = model.config.find_layer(w.input_layer);
        const LayerConfig* out = model.config.find_layer(w.output_layer);
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
        if (w.shared) {
            w.source_input_layer = get_text(nc, path, prefix + "_sourceInputLayer");
            w.source_output_layer = get_text(nc, path, prefix + "_sourceOutputLayer");
            w.transposed = get_int(nc, path, prefix + "_bTransposed") != 0;
        } else {
            w.values = read_vector(nc, path, prefix + "_weights", w.rows * w.cols);
            if (slots >= 1) w.state1 = read_vector(nc, path, prefix + "_state1", w.rows * w.cols);
            if (slots >= 2) w.state2 = read_vector(nc, path, prefix + "_state2", w.rows * w.cols);
        }
        model.weights.push_back(std::move(w));
    }
    for (int i = 0;; ++i) {
        const std::string var = "bias" + std::to_string(i);
        nc_type type;
        size_t len = 0;
        if (nc_inq_att(nc, NC_GLOBAL, (var + "_layer").c_str(), &type, &len) != NC_NOERR) break;
        ModelBias b;
        b.layer = get_text(nc, path, var + "_layer");
        const LayerConfig* layer = model.config.find_layer(b.layer);
        if (layer == nullptr) {
            throw Error(ErrorCategory::kIo,
                        path + ": " + var + " belongs to unknown layer '" + b.layer + "'");
        }
        b.values = read_vector(nc, path, var, layer->n);
        if (slots >= 1) b.state1 = read_vector(nc, path, var + "_state1", layer->n);
        if (slots >= 2) b.state2 = read_vector(nc, path, var + "_state2", layer->n);
        model.biases.push_back(std::move(b));
    }
    return model;
}

}  // namespace sparsenet::io
