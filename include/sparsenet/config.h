// NetworkConfig: a validated network definition in DSSTNE's JSON network language.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sparsenet/optimizer.h"

namespace sparsenet {

enum class LayerKind { kInput, kHidden, kOutput };
// docs/config-reference.md gives each formula. New kinds are appended (the values are stable).
enum class Activation {
    kSigmoid,
    kTanh,
    kRectifiedLinear,
    kLinear,
    kSoftMax,
    kLeakyRectifiedLinear,
    kExponentialLinear,
    kScaledExponentialLinear,
    kSoftPlus,
    kSoftSign,
};
enum class ErrorFunction {
    kL2,
    kCrossEntropy,
    kScaledMarginalCrossEntropy,
    kL1,
    kL2Hinge,
    kHinge,
    kDataScaledMarginalCrossEntropy,
};
enum class WeightInitScheme {
    kXavier,
    kGaussian,
    kUniform,
    kConstant,
    kCaffeXavier,
    kUnitBall,
    kSelu,
};

// The network's Kind: a label DSSTNE's configs carry (nothing depends on it).
enum class NetworkKind { kFeedForward, kAutoEncoder };

// The arithmetic of the matrix products (--precision, $.Training.Precision; docs/gpu.md,
// "Precision"). kFp32: FP32 operands and sums. kTf32: operands rounded to TF32 by the GPU's
// tensor cores (the CPU has none and computes kFp32). kBf16: operands rounded to BF16 (round to
// nearest even), products and sums in FP32; weights, gradients and optimizer state stay FP32.
enum class Precision { kFp32, kTf32, kBf16 };
const char* to_string(Precision v);  // "fp32", "tf32", "bf16"
// "fp32", "tf32" or "bf16" (case-insensitive); anything else is Error(kUsage) with the value
// and the accepted ones.
Precision parse_precision(const std::string& text);

const char* to_string(NetworkKind v);
const char* to_string(LayerKind v);
const char* to_string(Activation v);
const char* to_string(ErrorFunction v);
const char* to_string(WeightInitScheme v);

struct WeightInit {
    WeightInitScheme scheme = WeightInitScheme::kXavier;
    float scale = 1.0f;
    float bias = 0.0f;
};

// DSSTNE's sparseness penalty: beta * KL(p || batch-mean activation) per unit of a Hidden layer
// with "Sparse": true; off while beta == 0.
struct SparsenessPenalty {
    float p = 0.0f;
    float beta = 0.0f;
};

// Network-wide activation parameters (RELUSlope / Slope, ELUAlpha, SELULambda), DSSTNE defaults.
// Note DSSTNE's default slope 1.0 makes LeakyRectifiedLinear the identity: set RELUSlope.
struct ActivationDefaults {
    float relu_slope = 1.0f;
    float elu_alpha = 1.0f;
    float selu_lambda = 1.050701f;
};

// DSSTNE's SharedWeights entry, declared on the layer that consumes it: the edge
// input_layer -> this layer uses the weight matrix of the edge source_input_layer ->
// source_output_layer (its owner), transposed when `transposed`. Biases are never shared.
struct SharedWeights {
    std::string input_layer;  // one of this layer's sources
    std::string source_input_layer;
    std::string source_output_layer;
    bool transposed = false;
};

// A sparsenet extension ("FixedWeights", on the layer that consumes the edge): the edge from the
// Input layer `source` to this layer is fitted in closed form from the training data before the
// first step of a new network, then never trained (no gradient, no optimizer state); model files
// save and load it like any matrix. kEase: EASE^R (Steck 2019), B = I - P diag(1/diag(P)) with
// P = (X^T X + lambda I)^-1 and X the source layer's training rows, so diag(B) = 0; the edge's
// matrix is scale * B. The item-item linear path beside a nonlinear one (docs/quality.md).
// kGraphFilter: a graph filter over the degree-normalised item-item matrix (GF-CF, Shen et al.,
// CIKM 2021): with R~ = Du^-user_exponent X Di^-item_exponent (Du, Di: the users' and items'
// degrees, row and column sums of X), B = R~^T R~ + ideal_weight * Di^-b V V^T Di^b (b =
// item_exponent; GF-CF: 1/2), V the top `k` right singular vectors of R~ (k 0: the linear
// filter alone); the matrix is scale * B.
// popularity_exponent g > 0 (either fit): column j of B is divided by d_j^g, d_j item j's degree
// (column sum of X; a zero degree gives a zero column): a penalty on recommending popular items,
// on the scoring side only (RP3beta's beta, Paudel et al. 2017); B's rows are left as they are.
// Entries of one source are one edge whose matrix is the sum of their fits (same in_training).
// in_training false: the edge is left out of training's forward pass (the nonlinear part learns
// alone) and joins every inference-mode pass (scores, predictions, validation, evaluate_loss):
// an ensemble of the two models, expressed as one network.
enum class LinearFit { kEase, kGraphFilter };
struct FixedWeights {
    std::string source;  // one of this layer's sources: an Input layer as wide as this layer
    LinearFit fit = LinearFit::kEase;
    float lambda = 0.0f;  // kEase: > 0, the L2 weight of the fit
    float scale = 1.0f;   // the matrix is scale * B
    bool in_training = true;
    // kGraphFilter:
    uint32_t k = 0;              // singular vectors of the ideal low-pass part
    float ideal_weight = 0.0f;   // its weight beside the linear filter
    float user_exponent = 0.5f;  // R~ = Du^-user_exponent X Di^-item_exponent
    float item_exponent = 0.5f;
    float popularity_exponent = 0.0f;  // either fit: B's columns over the items' degree^this
    // Fit on the rows' 0/1 pattern (every stored entry counts 1) rather than their values: for
    // inputs whose values weigh the entries (`split fixed --recency`) while the item-item
    // relations are those of the interactions themselves.
    bool indicator = false;
};

struct LayerConfig {
    std::string name;
    LayerKind kind = LayerKind::kHidden;
    uint32_t n = 0;       // units; 0 when n_auto until resolved from the dataset
    bool n_auto = false;  // "N": "auto" (Input/Output only)
    bool sparse = false;
    std::string dataset;               // Input and Output layers
    std::vector<std::string> sources;  // non-input; default: the previous layer
    // Skip (non-input): layers of the same width whose activations are added to this layer's
    // pre-activation, before its activation function (DSSTNE's residual add).
    std::vector<std::string> skips;
    std::vector<SharedWeights> shared_weights;  // non-input; at most one per source
    std::vector<FixedWeights> fixed_weights;    // non-input; one source's fits are summed
    Activation activation = Activation::kSigmoid;
    // The activation's parameters: the layer's keys, else the network's (Hidden/Output layers).
    float relu_slope = 1.0f;        // LeakyRectifiedLinear, >= 0
    float elu_alpha = 1.0f;         // ExponentialLinear, ScaledExponentialLinear, >= 0
    float selu_lambda = 1.050701f;  // ScaledExponentialLinear, > 0
    float p_dropout = 0.0f;
    // Input layers ("Normalize": { "Norm": "L2", "Scale": s }): every example's stored input
    // values are scaled so that the row's L2 norm is s, before Denoising and pDropout drop
    // entries (Mult-VAE's normalisation). 0 = off. A sparsenet extension of DSSTNE's language.
    float normalize_l2 = 0.0f;
    WeightInit weight_init;
    // Max L2 norm of each unit's incoming weight vector (a column of every incoming weight
    // matrix), enforced after each update; 0 = off. Hidden/Output layers.
    float weight_norm = 0.0f;
    // Max L2 norm of each example's delta (dL/dz, in units of that example's loss) of this
    // layer, enforced in backward; 0 = off. Hidden/Output layers.
    float delta_norm = 0.0f;
    // The layer's SparsenessPenalty, else the network's. Used only where has_sparseness_penalty().
    // to_json writes relu_slope / elu_alpha / selu_lambda only where the activation uses them and
    // sparseness_penalty only on sparse Hidden layers, and operator== compares just those (the
    // others are the network's values after from_json).
    SparsenessPenalty sparseness_penalty;

    bool has_sparseness_penalty() const {
        return kind == LayerKind::kHidden && sparse && sparseness_penalty.beta > 0.0f;
    }
};

// SMCE margins (DSSTNE defaults).
struct SmceParams {
    float one_target = 0.9f;
    float zero_target = 0.1f;
    float one_scale = 1.0f;
    float zero_scale = 1.0f;
};

// The optional "Training" section: how to train this network, so that one file reproduces a run
// (`sparsenet train` flags override it; train_options() in trainer.h turns it into TrainOptions).
// Absent keys keep sparsenet's defaults.
struct TrainingConfig {
    OptimizerOptions
        optimizer;          // Optimizer, Alpha, Mu, Mu1, Epsilon, Lambda, Lambda1, SparseUpdates
    uint32_t epochs = 40;   // Epochs
    uint32_t batch = 1024;  // BatchSize
    uint64_t seed = 12134;  // Seed: weights, shuffling and masks
    // Precision: the GEMMs' arithmetic; unset: --precision, else SPARSENET_CUDA_TF32, else the
    // device's default (NetworkOptions::precision says the order).
    std::optional<Precision> precision;
};

struct NetworkConfig {
    double version = 0.9;
    std::string name;
    NetworkKind kind = NetworkKind::kFeedForward;  // a label only
    ErrorFunction error_function = ErrorFunction::kCrossEntropy;
    SmceParams smce;  // also DataScaledMarginalCrossEntropy's margins (either key sets them)
    float denoising_p = 0.0f;
    SparsenessPenalty sparseness_penalty;  // default of Hidden layers with "Sparse": true
    // DSSTNE's DeltaBoost: output deltas at units with a nonzero target are multiplied by
    // `one`, at the others by `zero` (the reported loss is not boosted).
    float delta_boost_one = 1.0f;
    float delta_boost_zero = 1.0f;
    ActivationDefaults activation_defaults;
    bool shuffle_indices = true;
    // DSSTNE's Decay (>= 0): optimizer step t uses learning rate alpha / (1 + decay * (t - 1)).
    float decay = 0.0f;
    std::optional<TrainingConfig> training;  // the "Training" section, when present
    std::vector<LayerConfig> layers;

    // Parse and validate. `source` names the file (or "<string>") in error messages.
    // Throws Error(kConfig) with the JSON path, or Error(kNotImplemented) naming the key.
    static NetworkConfig from_json(const std::string& json_text,
                                   const std::string& source = "<string>");
    static NetworkConfig from_file(const std::string& path);

    // Canonical JSON (DSSTNE spelling, every key explicit); from_json(to_json()) == *this.
    std::string to_json() const;
    // Error(kConfig) or Error(kNotImplemented), as from_json, unless this config passes every
    // check of from_json: a config built or edited in code meets the same rules as a file (it
    // is written with to_json and read back). The engine calls it before building a network.
    void validate() const;

    const LayerConfig* find_layer(const std::string& name) const;  // nullptr if absent
};

// The keys the parser accepts, and the DSSTNE keys it rejects as not implemented, per JSON object
// ("$", "$.Layers[]", "$.Layers[].WeightInit", ...). The parser checks documents against these
// very lists; docs/config-reference.md must list each of them (a test compares).
struct ConfigKeySet {
    std::string object;
    std::vector<std::string> accepted;         // aliases included (e.g. RELUSlope and Slope)
    std::vector<std::string> not_implemented;  // rejected with "not implemented yet: <Key>"
};
std::vector<ConfigKeySet> config_key_sets();

// The same for enumerated string values, by key ("$.Kind", "$.ErrorFunction",
// "$.Layers[].Kind", "$.Layers[].Type", "$.Layers[].Activation", "$.Layers[].WeightInit.Scheme",
// "$.Training.Optimizer", "$.Training.SparseUpdates").
struct ConfigValueSet {
    std::string key;
    std::vector<std::string> accepted;
    std::vector<std::string> not_implemented;
};
std::vector<ConfigValueSet> config_value_sets();

bool operator==(const WeightInit& a, const WeightInit& b);
bool operator==(const SparsenessPenalty& a, const SparsenessPenalty& b);
bool operator==(const ActivationDefaults& a, const ActivationDefaults& b);
bool operator==(const SharedWeights& a, const SharedWeights& b);
bool operator==(const FixedWeights& a, const FixedWeights& b);
bool operator==(const LayerConfig& a, const LayerConfig& b);
bool operator==(const SmceParams& a, const SmceParams& b);
bool operator==(const TrainingConfig& a, const TrainingConfig& b);
bool operator==(const NetworkConfig& a, const NetworkConfig& b);

}  // namespace sparsenet
