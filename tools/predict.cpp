// sparsenet predict: model + input dataset -> top-K recommendations in DSSTNE's recs format.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "args.h"
#include "common.h"
#include "recs_output.h"
#include "sparsenet/convert.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/model_info.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/resources.h"

namespace sparsenet::cli {
namespace {

// predict --compare-fp32: in how many rows the top-K of `top` (scored in `used`) differs from
// the fp32 top-K, as ordered lists and as sets.
std::string top_k_difference(const TopK& top, const TopK& fp32, Precision used) {
    uint64_t ordered = 0, sets = 0;
    for (uint64_t r = 0; r < top.rows; ++r) {
        const auto a = top.indices.begin() + r * top.k, b = fp32.indices.begin() + r * top.k;
        if (!std::equal(a, a + top.k, b)) ++ordered;
        std::vector<uint32_t> sa(a, a + top.k), sb(b, b + top.k);
        std::sort(sa.begin(), sa.end());
        std::sort(sb.begin(), sb.end());
        if (sa != sb) ++sets;
    }
    const double rows = top.rows > 0 ? double(top.rows) : 1.0;
    char line[256];
    std::snprintf(line, sizeof line,
                  "predict: the %s top-%u differs from fp32's in %.2f %% of rows (%llu of %llu; "
                  "as sets of items: %.2f %%)",
                  to_string(used), unsigned(top.k), 100.0 * double(ordered) / rows,
                  (unsigned long long)ordered, (unsigned long long)top.rows,
                  100.0 * double(sets) / rows);
    return line;
}

// Row-wise union of two CSR datasets with the same examples (boolean result).
Dataset csr_union(const Dataset& a, const Dataset& b) {
    if (a.is_indexed() || b.is_indexed()) return csr_union(a.expanded(), b.expanded());
    Dataset u;
    u.name = a.name + "+" + b.name;
    u.rows = a.rows;
    u.cols = std::max(a.cols, b.cols);
    u.offsets.assign(1, 0);
    for (uint64_t r = 0; r < a.rows; ++r) {
        std::set_union(a.indices.begin() + a.offsets[r], a.indices.begin() + a.offsets[r + 1],
                       b.indices.begin() + b.offsets[r], b.indices.begin() + b.offsets[r + 1],
                       std::back_inserter(u.indices));
        u.offsets.push_back(u.indices.size());
    }
    return u;
}

// --timings: the seconds of each phase on stderr as it ends ("predict: load 1.234 s"), for the
// benchmarks that report users per second of the whole process: load, score, top_k, write and
// total (from the start of the command to the file renamed into place).
// The default rows per batch: 1024 on the CPU; on a GPU 4096, halved down to 1024 while the
// batch's activation and delta buffers (8 bytes per unit of every non-input layer and row) would
// take more than a quarter of the device's free memory. Larger batches amortise each batch's
// launches and its synchronous download of the top-K lists (H100, ML-20M shape: 3.7 ms of
// scoring per 1,024 users).
uint32_t predict_batch(const Network& network, bool report) {
    constexpr uint32_t kCpuBatch = 1024, kGpuBatch = 4096;
    if (network.device() == "cpu") return kCpuBatch;
    uint64_t units = 0;
    for (const LayerConfig& l : network.config().layers)
        if (l.kind != LayerKind::kInput) units += network.layer_size(l.name);
    const uint64_t free_bytes = network.device_free_memory();
    uint32_t batch = kGpuBatch;
    while (batch > kCpuBatch && uint64_t(batch) * units * 8 > free_bytes / 4) batch /= 2;
    if (report) std::fprintf(stderr, "predict: batch %u rows\n", batch);
    return batch;
}

// The model file brought into the page cache while the device starts and the datasets are read
// (issue 45, item 3): one posix_fadvise(WILLNEED) of the whole file, which has the kernel read it
// ahead without copying anything to this process, on its own thread since the call may wait for
// the reads to be queued. The model itself is then read by Network::load on the main thread:
// the netCDF library is not thread-safe, so its reads of the model and of the datasets cannot
// run at once, but the disk's can. Errors are ignored (the load reports them).
void prefetch_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    ::close(fd);
}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

struct PhaseTimer {
    using Clock = std::chrono::steady_clock;
    bool on = false;
    Clock::time_point start = Clock::now();
    Clock::time_point last = start;
    void print(const char* phase, double seconds) const {
        if (on) std::fprintf(stderr, "predict: %s %.3f s\n", phase, seconds);
    }
    void mark(const char* phase) {
        const auto now = Clock::now();
        print(phase, std::chrono::duration<double>(now - last).count());
        last = now;
    }
    void total() const {
        print("total", std::chrono::duration<double>(Clock::now() - start).count());
    }
};

// --output-format npz: users (int64 row numbers, [rows]), items (uint32, [rows, k]; 2^32-1 in
// unused slots) and scores (float32, [rows, k]; -inf in unused slots), as the Python package's
// Network.predict returns them; with names, user_names and item_names ("<U" arrays by row and
// by column).
bool write_npz_file(const TopK& top, const std::vector<std::string>& sample_names,
                    const std::vector<std::string>& feature_names, std::FILE* out) {
    std::vector<int64_t> users(top.rows);
    for (uint64_t r = 0; r < top.rows; ++r) users[r] = int64_t(r);
    std::vector<NpyArray> arrays{
        {"users", "<i8", {top.rows}, users.data(), users.size() * sizeof(int64_t)},
        {"items", "<u4", {top.rows, top.k}, top.indices.data(), top.indices.size() * 4},
        {"scores", "<f4", {top.rows, top.k}, top.scores.data(), top.scores.size() * 4}};
    std::vector<char32_t> user_names, item_names;
    if (!sample_names.empty()) {
        NpyArray a{"user_names", "", {}, nullptr, 0};
        user_names = utf32_names(sample_names, "user names", top.rows, &a.descr);
        a.shape = {std::min<uint64_t>(top.rows, sample_names.size())};
        a.data = user_names.data();
        a.bytes = user_names.size() * 4;
        arrays.push_back(a);
    }
    if (!feature_names.empty()) {
        NpyArray a{"item_names", "", {feature_names.size()}, nullptr, 0};
        item_names = utf32_names(feature_names, "item names", feature_names.size(), &a.descr);
        a.data = item_names.data();
        a.bytes = item_names.size() * 4;
        arrays.push_back(a);
    }
    return write_npz(out, arrays);
}

// Rethrows an error of reading what option `flag` names with the flag in front, so that every
// message says which option's file was wrong; the category (and so the exit code) is kept.
template <class F>
auto for_option(const std::string& flag, F&& body) -> decltype(body()) {
    try {
        return body();
    } catch (const Error& e) {
        throw Error(e.category(), "option " + flag + ": " + e.what());
    }
}

// A features index for option `flag`: the file's labels; without a file the names the model
// carries for the layer (`model_names`), or else the numbers "0".."width-1" (ids are the columns
// themselves). `source` says which, for messages.
LabelIndex features_for(const std::string& flag, const std::string& path, uint32_t width,
                        const std::string& layer, const std::vector<std::string>& model_names,
                        const std::string& model_path, std::string* source) {
    if (path.empty() && model_names.empty()) {
        *source = "the columns 0.." + std::to_string(width - 1) + " of layer '" + layer + "'";
        return LabelIndex::numeric(width);
    }
    if (path.empty()) {
        *source = "the feature names in " + model_path;
        LabelIndex index;
        for (const std::string& name : model_names) index.insert(name);
        if (index.size() != model_names.size()) {
            throw Error(ErrorCategory::kData, model_path + ": the feature names of layer '" +
                                                  layer + "' repeat a name; give " + flag +
                                                  " FILE");
        }
        return index;
    }
    *source = flag + " " + path;
    LabelIndex index = for_option(flag, [&] { return LabelIndex::read(path); });
    if (index.size() > width) {
        throw Error(ErrorCategory::kData, "option " + flag + ": " + path + " names " +
                                              std::to_string(index.size()) + " features; layer '" +
                                              layer + "' has only " + std::to_string(width));
    }
    return index;
}

// DSSTNE text ('sample<TAB>feature[,value]:...', a file or a folder of them) read in memory as
// an indicator dataset: nothing is written. Samples get rows in first-seen order (`samples`
// grows); features outside `features` are dropped and counted in `stats`.
Dataset read_text(const std::string& flag, const std::string& path, const std::string& name,
                  LabelIndex& samples, const LabelIndex& features, uint32_t width,
                  ConvertStats& stats) {
    return for_option(flag, [&] {
        const std::vector<std::string> files = expand_input_paths(path);
        ConvertOptions options;
        options.format = TextFormat::kDsstne;
        options.ids = IdMode::kFirstSeen;
        options.grow_features = false;
        options.unknown = UnknownFeatures::kDrop;
        LabelIndex fixed = features;
        Dataset d = convert_text(files, name, options, samples, fixed, &stats);
        d.cols = width;
        return d;
    });
}

// The first `rows` rows of `d` (rows beyond them dropped; missing rows empty).
Dataset first_rows(Dataset d, uint64_t rows) {
    if (d.rows > rows) {
        d.offsets.resize(rows + 1);
        d.indices.resize(d.offsets.back());
        if (!d.values.empty()) d.values.resize(d.offsets.back());
    }
    while (d.rows < rows) {
        d.offsets.push_back(d.offsets.back());
        ++d.rows;
    }
    d.rows = rows;
    return d;
}

// A printf format for one score from -p: DSSTNE writes it without the '%' ("4.3f"); either
// form is taken. One floating-point conversion with optional flags, width and precision, and
// nothing else (a '%s' or a second conversion would read arguments that are not there).
std::string score_format(const std::string& p) {
    const std::string f = !p.empty() && p[0] == '%' ? p : "%" + p;
    size_t i = 1;
    while (i < f.size() && std::strchr("-+ #0", f[i]) != nullptr) ++i;
    size_t digits = 0;
    while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) ++i, ++digits;
    if (i < f.size() && f[i] == '.') {
        ++i;
        while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) ++i, ++digits;
    }
    if (i + 1 != f.size() || std::strchr("fFeEgGaA", f[i]) == nullptr || digits > 4) {
        throw Error(ErrorCategory::kUsage,
                    "option -p: '" + p +
                        "' is not a score format; expected one printf floating-point "
                        "conversion such as 4.3f, .6g or %10.4e");
    }
    return f;
}

const LayerConfig* find_layer(const NetworkConfig& config, const std::string& name) {
    for (const LayerConfig& l : config.layers) {
        if (l.name == name) return &l;
    }
    return nullptr;
}

}  // namespace

int predict_main(int argc, char** argv) {
    return run_command("predict", [&]() {
        std::string model_path, input_path, out_path, exclude_path, samples_index, features_index,
            device = "auto", output_layer, comm = "auto", parallel = "model", precision;
        // DSSTNE's predict: -d base (the input layer's DataSet is base + "_input"), -r samples
        // as text, -i input features index, -f filter text, -p score format.
        std::string base, text_path, input_features, filter_path, format;
        PredictOptions options;
        options.k = 100;
        options.batch = 1024;
        int threads = 0;
        bool keep_input = false;
        ArgParser args(
            "predict",
            "Scores every row of the input and writes the top-K items per row as "
            "'name<TAB>item,score:item,score:...'. The input is a dataset file (--input; the "
            "row's own input items are excluded unless --keep-input is given) or, as DSSTNE's "
            "predict, samples in DSSTNE's text format (-r, read in memory, with -d, -i, -o and "
            "-f: only the filter's items are excluded, whatever value they carry).");
        args.add({"-n", "--model"}, &model_path, "FILE.nc", "model file written by train", true);
        args.add({"--input"}, &input_path, "FILE.nc",
                 "dataset file holding the Input layer's dataset (or -r)");
        args.add({"-r", "--input-text"}, &text_path, "PATH",
                 "DSSTNE: input samples as text, 'sample<TAB>feature[,value]:...' (a file or a "
                 "folder of files); one output line per sample, in this order");
        args.add({"-d", "--dataset-base"}, &base, "NAME",
                 "DSSTNE: with -r, feed the input layer whose DataSet is NAME_input (default: "
                 "the only input layer)");
        args.add({"-i", "--input-features"}, &input_features, "FILE",
                 "DSSTNE: with -r, the input features index ('label<TAB>index'); features not in "
                 "it are counted and dropped. Default: the names the model carries, else column "
                 "numbers");
        args.add({"-f", "--filter"}, &filter_path, "PATH",
                 "DSSTNE: with -r, never recommend the items listed for a sample here (same text "
                 "format, file or folder; any value, a timestamp included, means excluded)");
        args.add({"-k"}, &options.k, "K", "recommendations per row (default 100)");
        args.add({"-b", "--batch"}, &options.batch, "N",
                 "rows per batch (default 1024; 4096 on a GPU whose free memory holds four times "
                 "the batch's layers)");
        args.add({"-s", "--output"}, &out_path, "FILE", "recommendations file (default stdout)");
        std::string output_format = "text";
        args.add({"--output-format"}, &output_format, "FORMAT",
                 "text | npz: DSSTNE's recs text (default), or an uncompressed .npz that "
                 "numpy.load reads (arrays users, items, scores; user_names, item_names with "
                 "names); npz needs -s FILE");
        args.add({"-p", "--score-format"}, &format, "FMT",
                 "printf format of a score, with or without '%' (DSSTNE: default 4.3f with -r, "
                 ".6g otherwise)");
        args.add_flag({"--keep-input"}, &keep_input, "do not exclude the row's own input items");
        args.add({"--exclude"}, &exclude_path, "FILE.nc",
                 "also exclude the items of this dataset's rows (first dataset of the file)");
        args.add({"--samples-index"}, &samples_index, "FILE",
                 "sample names ('label<TAB>index'); default: row numbers");
        args.add({"-o", "--features-index"}, &features_index, "FILE",
                 "output feature names ('label<TAB>index'); default: column numbers (with -r: "
                 "the names the model carries, if any)");
        args.add({"-l", "--output-layer"}, &output_layer, "NAME",
                 "layer to rank (default: the first Output layer)");
        args.add({"--threads"}, &threads, "N", "CPU threads (default: all cores)");
        args.add({"--device"}, &device, "DEV", "auto | cpu | cuda[:N] (default auto)");
        bool share_gpus = false;
        args.add_flag({"--share-gpus"}, &share_gpus, kShareGpusHelp);
        args.add({"--precision"}, &precision, "P", kPrecisionHelp);
        bool verbose_flag = false;
        args.add_flag({"-v", "--verbose"}, &verbose_flag,
                      "also say which device --device auto took when it is the CPU of a machine "
                      "without an NVIDIA GPU");
        args.add({"--comm"}, &comm, "KIND",
                 "auto | local | mpi | nccl: the ranks that split the model under mpirun "
                 "(default auto)");
        args.add({"--parallel"}, &parallel, "MODE",
                 "model | data: split the model's layers across the ranks, or let every rank "
                 "hold all of it (default model)");
        PhaseTimer timings;
        args.add_flag({"--timings"}, &timings.on,
                      "print each phase's seconds on stderr (load_device, load_data, load_model, "
                      "load, score, top_k, write, sync, total)");
        bool compare_fp32 = false;
        args.add_flag({"--compare-fp32"}, &compare_fp32,
                      "score a second time in fp32 and print on stderr in how many rows the "
                      "top-K differs from fp32's (with --precision bf16 or tf32)");
        bool bf16_weights_only = false;
        args.add_flag({"--bf16-weights-only"}, &bf16_weights_only,
                      "with --precision bf16: keep only the BF16 copies of the weights the GEMMs "
                      "read (half their memory, the same recommendations)");
        if (!args.parse(argc, argv)) return 0;
        (void)precision_option(precision);  // a bad value fails before any file is read
        if (output_format != "text" && output_format != "npz") {
            throw Error(ErrorCategory::kUsage, "option --output-format: '" + output_format +
                                                   "' is not an output format; expected text "
                                                   "or npz");
        }
        const bool npz = output_format == "npz";
        if (npz && out_path.empty()) {
            throw Error(ErrorCategory::kUsage,
                        "option --output-format npz: needs an output file (-s FILE.npz); the "
                        "standard output takes text only");
        }
        if (npz && !format.empty()) {
            throw Error(ErrorCategory::kUsage,
                        "option -p: formats the scores of text output; --output-format npz "
                        "stores them as float32");
        }
        if (options.k == 0) throw Error(ErrorCategory::kUsage, "option -k: must be at least 1");
        if (options.batch == 0) throw Error(ErrorCategory::kUsage, "option -b: must be positive");
        const bool batch_given = args.given("-b");
        const bool text = !text_path.empty();
        if (text == !input_path.empty()) {
            throw Error(ErrorCategory::kUsage,
                        "give the input as a dataset file (--input FILE.nc) or as DSSTNE text "
                        "(-r PATH), not " +
                            std::string(text ? "both" : "neither"));
        }
        for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"-d", &base},
                                          {"-i", &input_features},
                                          {"-f", &filter_path}}) {
            if (!text && !value->empty()) {
                throw Error(ErrorCategory::kUsage,
                            std::string("option ") + flag +
                                " goes with -r (DSSTNE text input); with --input use "
                                "--exclude FILE.nc for a filter");
            }
        }
        if (text && (keep_input || !exclude_path.empty() || !samples_index.empty())) {
            throw Error(ErrorCategory::kUsage,
                        "with -r, the sample names come from the text and only -f excludes "
                        "items; --keep-input, --exclude and --samples-index go with --input");
        }
        const ScoreFormat score_writer(
            score_format(format.empty() ? (text ? "4.3f" : ".6g") : format));
        options.output_layer = output_layer;
        set_threads(threads);
        set_verbose(verbose_flag);

        // The load, three things at once: the device starts on a thread (prepare_device: on CUDA
        // the context and cuBLAS, which Network::load then finds started), the model file is
        // read ahead into the page cache on another (prefetch_file), and this thread reads the
        // datasets the input layers read (--input; the model's config from its header, no
        // weights) and then the model (Network::load). Every file is read through netCDF on this
        // thread in the order it always was, so the first error is the one reported before, and
        // it names its file. --timings: load_device, load_data and load_model, each on its own
        // clock (they overlap), then load (the whole phase).
        std::map<std::string, Dataset> datasets;
        std::thread device_start, model_prefetch;
        PhaseTimer::Clock::time_point device_ready{};
        struct Joined {
            std::thread& t;
            ~Joined() {
                if (t.joinable()) t.join();
            }
        } joined{device_start}, joined_prefetch{model_prefetch};
        // Each rank's GPU, and the refusal of more ranks than GPUs on a node, before any file is
        // read (here, on the main thread: an MPI split that finds the rank is collective).
        check_rank_device(device, share_gpus);
        const PhaseTimer::Clock::time_point load_start = PhaseTimer::Clock::now();
        if (device != "cpu") {
            device_start = std::thread([device, share_gpus, &device_ready] {
                prepare_device(device, share_gpus);
                device_ready = PhaseTimer::Clock::now();
            });
        }
        model_prefetch = std::thread([model_path] { prefetch_file(model_path); });
        const PhaseTimer::Clock::time_point data_start = PhaseTimer::Clock::now();
        if (!text) {
            const NetworkConfig model_config = read_model_info(model_path).config;
            std::vector<const LayerConfig*> inputs;
            for (const LayerConfig& l : model_config.layers) {
                if (l.kind == LayerKind::kInput) inputs.push_back(&l);
            }
            // Only the datasets the input layers read: a training file also holds the output
            // dataset, as large (reading both doubled predict's load of the ML-20M shape). A
            // file with a single dataset feeds a single-input network whatever its name.
            const std::vector<std::string> in_file = list_datasets(input_path);
            const auto holds = [&](const std::string& name) {
                return std::find(in_file.begin(), in_file.end(), name) != in_file.end();
            };
            if (inputs.size() == 1 && in_file.size() == 1 && !holds(inputs[0]->dataset)) {
                Dataset only = Dataset::read(input_path, in_file[0]);
                only.name = inputs[0]->dataset;
                datasets.emplace(only.name, std::move(only));
            }
            for (const LayerConfig* l : inputs) {
                if (datasets.count(l->dataset)) continue;
                if (!holds(l->dataset)) {
                    throw Error(ErrorCategory::kData, input_path + ": has no dataset '" +
                                                          l->dataset + "' for input layer '" +
                                                          l->name + "'");
                }
                datasets.emplace(l->dataset, Dataset::read(input_path, l->dataset));
            }
        }

        const PhaseTimer::Clock::time_point model_start = PhaseTimer::Clock::now();
        NetworkOptions net_options;
        net_options.device = device;
        net_options.share_gpus = share_gpus;
        net_options.threads = threads;
        net_options.comm = parse_comm_kind(comm);
        net_options.parallel = parse_parallel_mode(parallel);
        net_options.precision = precision_option(precision);
        Network network = Network::load(model_path, net_options);
        if (bf16_weights_only) {
            if (compare_fp32) {
                throw Error(ErrorCategory::kUsage,
                            "--bf16-weights-only and --compare-fp32 exclude each other (the "
                            "FP32 scoring needs the FP32 weights)");
            }
            network.keep_only_bf16_weights();  // Error(kUsage) outside bf16
        }
        const PhaseTimer::Clock::time_point model_end = PhaseTimer::Clock::now();
        if (device_start.joinable()) device_start.join();  // started: Network::load used it
        if (model_prefetch.joinable()) model_prefetch.join();
        if (device_ready != PhaseTimer::Clock::time_point{}) {
            timings.print("load_device", seconds_between(load_start, device_ready));
        }
        timings.print("load_data", seconds_between(data_start, model_start));
        // Network::load: the model's reads and uploads, after any wait for the device.
        timings.print("load_model", seconds_between(model_start, model_end));
        report_rank_device(network.device());
        report_bf16_kernel("predict", network.device(), network.precision());
        const NetworkConfig& config = network.config();
        std::vector<const LayerConfig*> inputs;
        for (const LayerConfig& l : config.layers) {
            if (l.kind == LayerKind::kInput) inputs.push_back(&l);
        }
        const std::string out_layer_name = [&] {
            if (!output_layer.empty()) return output_layer;
            for (const LayerConfig& l : config.layers) {
                if (l.kind == LayerKind::kOutput) return l.name;
            }
            return std::string();
        }();
        {
            const LayerConfig* l = find_layer(config, out_layer_name);
            if (l == nullptr || l->kind == LayerKind::kInput) {
                std::string names;
                for (const LayerConfig& c : config.layers) {
                    if (c.kind != LayerKind::kInput) names += (names.empty() ? "" : ", ") + c.name;
                }
                throw Error(ErrorCategory::kUsage,
                            "option -l: " + model_path + " has no " +
                                (l == nullptr ? "layer" : "non-input layer") + " '" +
                                out_layer_name + "'; expected one of: " + names);
            }
        }
        const uint32_t out_width = network.layer_size(out_layer_name);
        options.batch = batch_given ? options.batch : predict_batch(network, timings.on);

        std::vector<std::string> sample_names, feature_names;
        const Dataset* exclude = nullptr;
        Dataset merged, filter;
        if (text) {
            // DSSTNE: the input layer fed is the one whose DataSet is <-d>_input.
            const LayerConfig* in_layer = nullptr;
            std::string listed;
            for (const LayerConfig* l : inputs) {
                listed += (listed.empty() ? "'" : ", '") + l->dataset + "'";
                if (base.empty() ? inputs.size() == 1 : l->dataset == base + "_input") {
                    in_layer = l;
                }
            }
            if (in_layer == nullptr) {
                throw Error(
                    ErrorCategory::kUsage,
                    base.empty()
                        ? "option -d: " + model_path + " has " + std::to_string(inputs.size()) +
                              " input layers; name the one to feed with -d "
                              "(its DataSet without '_input': " +
                              listed + ")"
                        : "option -d: " + model_path + " has no input layer whose DataSet is '" +
                              base + "_input'; its input layers read " + listed);
            }
            if (inputs.size() != 1) {
                throw Error(ErrorCategory::kUsage,
                            "option -r: feeds one input layer; " + model_path + " has " +
                                std::to_string(inputs.size()) + " (use --input FILE.nc)");
            }
            const uint32_t in_width = network.layer_size(in_layer->name);
            std::string in_source, out_source;
            const LabelIndex in_features =
                features_for("-i", input_features, in_width, in_layer->name,
                             network.feature_names(in_layer->name), model_path, &in_source);
            LabelIndex samples;
            ConvertStats stats;
            Dataset input = read_text("-r", text_path, in_layer->dataset, samples, in_features,
                                      in_width, stats);
            if (stats.dropped_unknown > 0) {
                std::fprintf(stderr,
                             "sparsenet predict: -r %s: dropped %llu feature%s of %llu distinct "
                             "name%s not in %s\n",
                             text_path.c_str(), (unsigned long long)stats.dropped_unknown,
                             stats.dropped_unknown == 1 ? "" : "s",
                             (unsigned long long)stats.distinct_dropped,
                             stats.distinct_dropped == 1 ? "" : "s", in_source.c_str());
            }
            const uint64_t rows = samples.size();
            sample_names.reserve(rows);
            for (uint64_t r = 0; r < rows; ++r) {
                sample_names.push_back(samples.label(static_cast<uint32_t>(r)));
            }
            datasets.emplace(in_layer->dataset, std::move(input));
            const LabelIndex out_features =
                features_for("-o", features_index, out_width, out_layer_name,
                             network.feature_names(out_layer_name), model_path, &out_source);
            if (!features_index.empty() || !network.feature_names(out_layer_name).empty()) {
                for (uint32_t c = 0; c < out_features.size(); ++c) {
                    feature_names.push_back(out_features.label(c));
                }
            }
            if (!filter_path.empty()) {
                // Samples of the filter that -r does not have are appended, then cut off.
                LabelIndex filter_samples = samples;
                ConvertStats filter_stats;
                filter = first_rows(read_text("-f", filter_path, "filter", filter_samples,
                                              out_features, out_width, filter_stats),
                                    rows);
                exclude = &filter;
            }
        } else {
            if (!samples_index.empty()) sample_names = read_index(samples_index);
            if (!features_index.empty()) feature_names = read_index(features_index);
            if (!feature_names.empty() && feature_names.size() < out_width) {
                throw Error(ErrorCategory::kData, features_index + ": names " +
                                                      std::to_string(feature_names.size()) +
                                                      " features; layer '" + out_layer_name +
                                                      "' has " + std::to_string(out_width));
            }
        }

        Predictor predictor(network, pointers(datasets));
        if (!text && !sample_names.empty() && sample_names.size() < predictor.rows()) {
            throw Error(ErrorCategory::kData, samples_index + ": names " +
                                                  std::to_string(sample_names.size()) +
                                                  " samples; the input has " +
                                                  std::to_string(predictor.rows()) + " rows");
        }

        // What to exclude: the row's own inputs (default) and/or an explicit filter dataset.
        if (!text && !keep_input) {
            if (inputs.size() != 1) {
                throw Error(ErrorCategory::kUsage,
                            "excluding the input items needs a single-input network; use "
                            "--keep-input with --exclude FILE.nc");
            }
            const Dataset& in = datasets.at(inputs[0]->dataset);
            if (in.cols > out_width) {
                throw Error(ErrorCategory::kUsage,
                            "the input dataset is wider than the output layer, so its items are "
                            "not output items; use --keep-input (and --exclude FILE.nc)");
            }
            exclude = &in;
        }
        if (!text && !exclude_path.empty()) {
            filter = Dataset::read(exclude_path);
            if (exclude != nullptr) {
                if (filter.examples() != exclude->examples()) {
                    throw Error(ErrorCategory::kData,
                                exclude_path + ": has " + std::to_string(filter.examples()) +
                                    " rows; the input has " + std::to_string(exclude->examples()));
                }
                merged = csr_union(*exclude, filter);
                exclude = &merged;
            } else {
                exclude = &filter;
            }
        }

        timings.mark("load");
        PredictTimings phases;
        if (timings.on) options.timings = &phases;
        const TopK top = predictor.top_k(options, exclude);
        timings.print("score", phases.score);
        timings.print("top_k", phases.top_k);
        if (compare_fp32) {  // a second scoring, outside the timed phases
            const Precision used = network.precision();
            network.set_precision(Precision::kFp32);
            const TopK reference = predictor.top_k(options, exclude);
            network.set_precision(used);
            if (network.rank() == 0)
                std::fprintf(stderr, "%s\n", top_k_difference(top, reference, used).c_str());
        }
        timings.last = PhaseTimer::Clock::now();
        if (network.rank() != 0) return 0;  // a split model: every rank merged; rank 0 writes
        // -s FILE: atomic replacement, as write_model: a temporary file flushed to the device and
        // renamed over FILE; a failed write (a full disk, the file size limit) leaves a previous
        // FILE as it was and no temporary file.
        // A path that exists and is not a regular file, or a symbolic link (/dev/stdout, a pipe),
        // is written in place: renaming over it would replace the link or the device node.
        std::error_code ec;
        const auto status = std::filesystem::symlink_status(out_path, ec);
        const bool in_place = !out_path.empty() && std::filesystem::exists(status) &&
                              !std::filesystem::is_regular_file(status);
        FILE* out = stdout;
        const std::string tmp = in_place ? out_path : out_path + ".tmp." + std::to_string(getpid());
        auto fail = [&](const std::string& what) {
            const std::string reason = std::strerror(errno);
            const std::string hint = storage_hint(out_path);
            if (out != nullptr) std::fclose(out);
            if (!in_place) std::remove(tmp.c_str());
            throw Error(ErrorCategory::kIo, out_path +
                                                ": not written (a previous file of that name is "
                                                "left as it was): " +
                                                what + ": " + reason + hint);
        };
        if (!out_path.empty()) {
            out = std::fopen(tmp.c_str(), "w");
            if (out == nullptr) {
                throw Error(ErrorCategory::kIo,
                            out_path + ": cannot write " + tmp + ": " + std::strerror(errno));
            }
        }
        bool written = false;
        try {
            written =
                npz ? write_npz_file(top, sample_names, feature_names, out)
                    : write_recs_text(
                          RecsText{&top, &sample_names, &feature_names, &score_writer, text}, out);
        } catch (...) {  // a name that is not UTF-8 (npz): no temporary file left behind
            if (!out_path.empty()) std::fclose(out);
            if (!out_path.empty() && !in_place) std::remove(tmp.c_str());
            throw;
        }
        // A write error on the standard output (a closed pipe) ends the output, as before.
        if (!written && !out_path.empty()) fail("writing " + tmp);
        timings.mark("write");
        if (!out_path.empty()) {
            if (std::fflush(out) != 0 || std::ferror(out) != 0) fail("writing " + tmp);
            if (in_place) {
                const int closed = std::fclose(out);
                out = nullptr;
                if (closed != 0) fail("closing it");
                timings.total();
                return 0;
            }
            if (::fsync(fileno(out)) != 0) fail("flushing " + tmp + " to disk (fsync)");
            const int closed = std::fclose(out);
            out = nullptr;
            if (closed != 0) fail("closing " + tmp);
            if (std::rename(tmp.c_str(), out_path.c_str()) != 0) fail("renaming " + tmp + " to it");
            if (!sync_parent_directory(out_path)) {
                throw Error(ErrorCategory::kIo, out_path +
                                                    ": written, but its directory could not be "
                                                    "flushed to disk (fsync): " +
                                                    std::strerror(errno));
            }
            timings.mark("sync");  // the fsync of the file, its rename and its directory's fsync
        }
        timings.total();
        return 0;
    });
}

}  // namespace sparsenet::cli
