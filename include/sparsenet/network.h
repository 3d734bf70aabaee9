// Network: a trained or trainable model (config + weights) living on one backend.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/optimizer.h"
#include "sparsenet/step_switches.h"

namespace sparsenet {

// Which ranks split the network (NetworkOptions::comm).
enum class CommKind { kAuto, kLocal, kMpi, kNccl };
// How several ranks share the work (NetworkOptions::parallel).
enum class ParallelMode { kAuto, kModel, kData };

const char* to_string(CommKind v);      // "auto", "local", "mpi", "nccl"
const char* to_string(ParallelMode v);  // "auto", "model", "data"
// The spellings of the CLI's --comm and --parallel (case-insensitive); anything else is
// Error(kUsage) with the value and the accepted ones.
CommKind parse_comm_kind(const std::string& text);
ParallelMode parse_parallel_mode(const std::string& text);

// What Network::load keeps of a model (docs/library.md, "Memory"), for a process that serves it.
// The file is read in blocks of rows, each block going straight into what is kept, so a matrix
// kept only in BF16, or not at all, is never allocated in FP32: loading peaks near what the
// network holds afterwards. Network::create ignores it.
struct LoadOptions {
    // Matrices that only sparse Input layers read are kept as their BF16 copies alone
    // (keep_bf16_input_weights, at load). CPU only.
    bool bf16_input_weights = false;
    // The output layer `output_layer` ("" = the first Output layer) does not keep the matrix of
    // its one dense source edge, when that edge alone uses it: a server that ranks the layer from
    // an ANN index's own vectors never runs it. What was read is fingerprinted on the way
    // (engine/output_fingerprint.h), so the index can still be checked against the model.
    bool release_output = false;
    std::string output_layer;
    // With release_output: also handed each block of rows of that matrix as it is read, values
    // [rows, cols] of rows [first_row, first_row + rows) of the stored [total_rows (source
    // units), cols (items)] matrix (an ANN index builder takes its item vectors so).
    std::function<void(uint64_t first_row, uint64_t rows, uint64_t total_rows, uint32_t cols,
                       const float* values)>
        output_rows;
    // Matrices only sparse Input layers read are not read at all: for a network that never runs
    // a forward pass (an index builder). Excludes bf16_input_weights.
    bool drop_input_weights = false;
    // Floats per block of rows read from the file (0: 2^24, 64 MB): the load's transient memory
    // beyond what it keeps.
    size_t chunk_floats = 0;
};

struct NetworkOptions {
    std::string device = "auto";  // "auto" | "cpu" | "cuda[:N]"
    int threads = 0;              // CPU threads; 0 = all cores
    uint64_t seed = 12134;        // weight initialisation (DSSTNE's fixed seed by default)
    // Model parallelism (docs/parallelism.md): the ranks that split every layer's weights.
    // kAuto: every rank of the MPI job when the process was started by mpirun with more than
    // one rank (over NCCL when the device is a GPU and NCCL was built, else MPI), otherwise this
    // process alone; kLocal: this process alone; kMpi or kNccl: force one. A network split
    // over several ranks makes every call collective (each rank makes it, in the same order):
    // create/load, training, prediction, save and get_parameter (whole values on every rank).
    CommKind comm = CommKind::kAuto;
    // How several ranks share the work (docs/parallelism.md): kModel splits every layer's
    // weights across them; kData replicates the weights, gives each rank its share of every
    // batch and sums the gradients (all-reduce); kAuto takes the one that moves fewer bytes per
    // step for `batch` rows, and kData when the network has something a split network cannot
    // run yet.
    ParallelMode parallel = ParallelMode::kAuto;
    uint32_t batch = 0;  // the batch size "auto" weighs; 0: the config's Training one, else 1024
    // The matrix products' arithmetic (sparsenet/config.h Precision; docs/gpu.md, "Precision"):
    // this when set (--precision), else the config's $.Training.Precision, else
    // SPARSENET_CUDA_TF32 on CUDA ("0": fp32, else tf32), else tf32 on CUDA and fp32 on the
    // CPU. The weights stay FP32 in memory and in model files in every mode.
    std::optional<Precision> precision;
    // Under mpirun, "auto" and "cuda" take the GPU of the process's node-local rank
    // (sparsenet/rank_device.h); a node with more ranks than GPUs is refused unless this is set,
    // which puts node-local rank r on GPU r mod the node's GPU count. "cuda:N" takes GPU N on
    // every rank. One process (no launcher) takes GPU 0 whatever this says.
    bool share_gpus = false;
    // The training step's switches (sparsenet/step_switches.h): the environment's by default.
    StepSwitches switches = StepSwitches::process();
    LoadOptions load;  // Network::load only
};

// A named parameter tensor, row-major.
struct Parameter {
    std::string name;  // "weight:<source>-><layer>" ([in, out]) or "bias:<layer>" ([1, n])
    uint64_t rows = 0;
    uint64_t cols = 0;
};

class Network {
  public:
    // Builds the network. dataset_widths maps dataset names to their column counts; it resolves
    // "N": "auto" and checks every explicit N against its dataset. Weights are initialised from
    // options.seed as the config's WeightInit says.
    static Network create(const NetworkConfig& config,
                          const std::map<std::string, uint32_t>& dataset_widths,
                          const NetworkOptions& options = {});

    // Loads a model file written by save(); nothing else is needed to predict.
    static Network load(const std::string& path, const NetworkOptions& options = {});

    // Writes config + weights + biases to a netCDF model file, atomically: a temporary file in
    // the same directory, flushed to disk (fsync), renamed over `path`, and the directory flushed.
    // A process reading `path` meanwhile sees the old model or the new one; when saving fails
    // (Error kIo naming `path`) the old file is untouched and no temporary file remains.
    void save(const std::string& path) const;

    const NetworkConfig& config() const;  // with every "auto" resolved
    std::string device() const;           // the backend's name, e.g. "cpu"
    // Bytes free on that device now (the CPU: MemAvailable), through the network's own backend.
    uint64_t device_free_memory() const;
    // The matrix products' arithmetic now (NetworkOptions::precision says how it was chosen);
    // set_precision changes it for the next training step or prediction (predict
    // --compare-fp32 scores twice so).
    Precision precision() const;
    void set_precision(Precision p);
    // Inference only, under Precision::kBf16 (predict and serve with --precision bf16 when asked):
    // frees the FP32 weights of every matrix that only GEMMs read, keeping their BF16 copies,
    // which those GEMMs read anyway: half the memory of those weights, the same scores. Matrices
    // a sparse input multiplies (csr_matmul, FP32 in every precision) keep their FP32 weights.
    // Afterwards training, save, get_parameter / set_parameter of a freed matrix and
    // set_precision throw Error(kUsage). Error(kUsage) outside kBf16.
    void keep_only_bf16_weights();
    bool only_bf16_weights() const;  // whether keep_only_bf16_weights or the next one ran
    // Inference only, in any precision, on the CPU backend: rounds the weights of every matrix
    // that only sparse inputs multiply (csr_matmul; not one a GEMM also reads, such as a tied
    // output layer's) to BF16 and frees their FP32 weights. csr_matmul then widens the rows it
    // gathers from the BF16 copy: bit for bit the FP32 product with the BF16-rounded weights,
    // half the memory of those matrices, scores changed by that rounding (docs/serving.md,
    // "Memory"). Afterwards as keep_only_bf16_weights: training, save, get_parameter of a freed
    // matrix and set_precision throw Error(kUsage). Error(kUsage) on another backend. Returns
    // the bytes saved (the FP32 weights less their BF16 copies), those of matrices a load with
    // LoadOptions::bf16_input_weights never held in FP32 included.
    size_t keep_bf16_input_weights();
    // Model parallelism: this process's rank among the ranks that split the network, and their
    // number (0 and 1 for a network of one process).
    int rank() const;
    int ranks() const;
    // "none" (one rank), "model" or "data": how the ranks share the work.
    std::string parallel() const;
    uint32_t layer_size(const std::string& layer) const;
    // Names of a layer's units (the features index its dataset was converted with): empty when
    // the model has none. save() keeps them in the model file and load() reads them back, so a
    // model resolves item names alone. set_feature_names: at most layer_size names (Error(kUsage)
    // otherwise, or for an unknown layer); an empty list removes them.
    const std::vector<std::string>& feature_names(const std::string& layer) const;
    void set_feature_names(const std::string& layer, std::vector<std::string> names);

    std::vector<Parameter> parameters() const;
    std::vector<float> get_parameter(const std::string& name) const;
    void set_parameter(const std::string& name, const std::vector<float>& values);

    Network(Network&&) noexcept;
    Network& operator=(Network&&) noexcept;
    ~Network();

    struct Impl;
    Impl& impl() { return *impl_; }
    const Impl& impl() const { return *impl_; }

  private:
    explicit Network(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The model-parallel plan of a network over `ranks` ranks, computed without running or
// allocating anything (sparsenet train --dry-run): per layer the units per rank; per weight
// matrix the split, the largest rank's block, the collectives of one training step and the bytes
// each rank sends; the largest rank's memory for parameters, gradients, optimizer state and
// batch buffers of `batch` rows (datasets not included); and the bytes per step a data-parallel
// run would move instead. A text report; docs/parallelism.md explains it.
std::string describe_model_parallel(const NetworkConfig& config,
                                    const std::map<std::string, uint32_t>& dataset_widths,
                                    int ranks, uint32_t batch, OptimizerKind optimizer);

// Starts the device that NetworkOptions::device `device` names ahead of Network::load, for a
// caller with files to read meanwhile (predict runs it on a thread while it reads its input):
// on CUDA, the device's context and cuBLAS, which the load then finds started; nothing for the
// CPU. Safe on any thread; never throws (what fails is reported by the load).
// share_gpus: as NetworkOptions::share_gpus (under mpirun, the rank's GPU is the one started).
void prepare_device(const std::string& device, bool share_gpus = false);

// The memory of a training run on one device (the largest rank's share under model parallelism
// over `ranks`), computed from the config, the optimizer and the datasets' shapes alone
// (read_dataset_shape: file headers, nothing loaded, nothing allocated). Bytes by part, each a
// separate field so that a change of what the engine allocates changes one line (a dense
// gradient fused into its GEMM: dense_weight_gradients drops out). docs/memory.md.
struct MemoryPlan {
    int ranks = 1;
    uint32_t batch = 0;
    // The GEMMs' arithmetic; kBf16: every matrix a GEMM reads keeps a BF16 copy (bf16_weights).
    Precision precision = Precision::kFp32;
    double weights = 0;                 // every owned matrix (this rank's block)
    double bf16_weights = 0;            // kBf16: 2 B per weight of each matrix a GEMM reads
    double biases = 0;                  // every non-input layer's bias
    double optimizer_state = 0;         // state slots of the trained weights and biases
    double row_clocks = 0;              // exact Momentum/Nesterov sparse updates: 4 B per row
    double dense_weight_gradients = 0;  // trained matrices whose dense gradient is written
    double other_gradients = 0;         // bias gradients, row-sparse gradients of sparse inputs
    double activations = 0;             // activations and deltas of a batch
    // kBf16: BF16 copies (2 B a value) of the activations and deltas that GEMMs read, written by
    // the ops that produce them (docs/gpu.md, "BF16 weight copies"; none where a later op changes
    // the values, and none with SPARSENET_BF16_ACTIVATION_COPIES=0)
    double bf16_activations = 0;
    double scratch = 0;        // collectives (split), op scratch sized by the batch
    double datasets = 0;       // training datasets resident on the device + permutation
    double file_chunks = 0;    // a save's or checkpoint's chunk buffers (transient)
    double host_datasets = 0;  // the datasets as read from the files (host memory)
    // Device memory: every part but host_datasets. On the CPU the device is the host: add them.
    double device_bytes() const;
    double total_bytes(bool device_is_host) const;
};

// The shape of each dataset a run reads, by name (read_dataset_shape of the files).
// data_parallel: a rank of --parallel data (whole network; every dense gradient is written, to
// be summed over the ranks).
// precision: the GEMMs' (under kBf16 every matrix a GEMM reads keeps a BF16 copy, 2 B a
// weight, beside its FP32 master).
MemoryPlan plan_memory(const NetworkConfig& config,
                       const std::map<std::string, DatasetShape>& datasets, int ranks,
                       uint32_t batch, const OptimizerOptions& optimizer, float decay,
                       bool data_parallel = false, Precision precision = Precision::kFp32,
                       const StepSwitches& switches = StepSwitches::process());

// The plan as text: one line per part and the total, "for one device" or "per rank of N".
std::string describe_memory(const MemoryPlan& plan, bool device_is_host);

// The memory free for a plan on `device` ("cpu", "cuda", "cuda:N", "auto" as make_backend takes
// them): the CUDA runtime's free device memory (cudaMemGetInfo), or on the CPU MemAvailable from
// /proc/meminfo. SPARSENET_MEMORY_LIMIT_BYTES (a number of bytes) overrides both (tests, or a
// limit below what the machine has). *what (nullable) gets where the figure came from,
// *device_is_host (nullable) whether the device is the CPU. share_gpus: as
// NetworkOptions::share_gpus (under mpirun, the rank's own GPU is the one asked).
uint64_t free_memory_for(const std::string& device, int threads, std::string* what,
                         bool* device_is_host, bool share_gpus = false);

// Collective-free check before anything is allocated (sparsenet train): throws
// Error(kDevice) when `plan` exceeds `free_bytes`, naming what is needed (by part), what is
// free, and what would fit: model parallelism over the fewest ranks whose per-rank plan fits,
// a smaller batch (the largest power of two that fits). Nothing when the plan fits.
void check_memory_plan(const NetworkConfig& config,
                       const std::map<std::string, DatasetShape>& datasets, const MemoryPlan& plan,
                       const OptimizerOptions& optimizer, float decay, bool device_is_host,
                       uint64_t free_bytes, const std::string& free_what);

}  // namespace sparsenet
