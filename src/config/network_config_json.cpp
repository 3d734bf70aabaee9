// NetworkConfig::to_json (canonical DSSTNE-spelled JSON), the enum to_string functions and the
// equality operators declared in sparsenet/config.h.

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sparsenet/config.h"
#include "sparsenet/error.h"

#include "config/json_text.h"

namespace sparsenet {

const char* to_string(Precision v) {
    switch (v) {
        case Precision::kFp32:
            return "fp32";
        case Precision::kTf32:
            return "tf32";
        case Precision::kBf16:
            return "bf16";
    }
    return "unknown";
}

Precision parse_precision(const std::string& text) {
    std::string t = text;
    for (char& c : t) c = char(std::tolower(static_cast<unsigned char>(c)));
    for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
        if (t == to_string(p)) return p;
    }
    throw Error(ErrorCategory::kUsage,
                "precision '" + text + "' is unknown; expected fp32, tf32 or bf16");
}

const char* to_string(NetworkKind v) {
    switch (v) {
        case NetworkKind::kFeedForward:
            return "FeedForward";
        case NetworkKind::kAutoEncoder:
            return "AutoEncoder";
    }
    return "Unknown";
}

const char* to_string(LayerKind v) {
    switch (v) {
        case LayerKind::kInput:
            return "Input";
        case LayerKind::kHidden:
            return "Hidden";
        case LayerKind::kOutput:
            return "Output";
    }
    return "Unknown";
}

const char* to_string(Activation v) {
    switch (v) {
        case Activation::kSigmoid:
            return "Sigmoid";
        case Activation::kTanh:
            return "Tanh";
        case Activation::kRectifiedLinear:
            return "RectifiedLinear";
        case Activation::kLinear:
            return "Linear";
        case Activation::kSoftMax:
            return "SoftMax";
        case Activation::kLeakyRectifiedLinear:
            return "LeakyRectifiedLinear";
        case Activation::kExponentialLinear:
            return "ExponentialLinear";
        case Activation::kScaledExponentialLinear:
            return "ScaledExponentialLinear";
        case Activation::kSoftPlus:
            return "SoftPlus";
        case Activation::kSoftSign:
            return "SoftSign";
    }
    return "Unknown";
}

const char* to_string(ErrorFunction v) {
    switch (v) {
        case ErrorFunction::kL2:
            return "L2";
        case ErrorFunction::kCrossEntropy:
            return "CrossEntropy";
        case ErrorFunction::kScaledMarginalCrossEntropy:
            return "ScaledMarginalCrossEntropy";
        case ErrorFunction::kL1:
            return "L1";
        case ErrorFunction::kL2Hinge:
            return "L2Hinge";
        case ErrorFunction::kHinge:
            return "Hinge";
        case ErrorFunction::kDataScaledMarginalCrossEntropy:
            return "DataScaledMarginalCrossEntropy";
    }
    return "Unknown";
}

const char* to_string(WeightInitScheme v) {
    switch (v) {
        case WeightInitScheme::kXavier:
            return "Xavier";
        case WeightInitScheme::kGaussian:
            return "Gaussian";
        case WeightInitScheme::kUniform:
            return "Uniform";
        case WeightInitScheme::kConstant:
            return "Constant";
        case WeightInitScheme::kCaffeXavier:
            return "CaffeXavier";
        case WeightInitScheme::kUnitBall:
            return "UnitBall";
        case WeightInitScheme::kSelu:
            return "SELU";
    }
    return "Unknown";
}

bool operator==(const WeightInit& a, const WeightInit& b) {
    return a.scheme == b.scheme && a.scale == b.scale && a.bias == b.bias;
}

bool operator==(const SparsenessPenalty& a, const SparsenessPenalty& b) {
    return a.p == b.p && a.beta == b.beta;
}

bool operator==(const ActivationDefaults& a, const ActivationDefaults& b) {
    return a.relu_slope == b.relu_slope && a.elu_alpha == b.elu_alpha &&
           a.selu_lambda == b.selu_lambda;
}

bool operator==(const SharedWeights& a, const SharedWeights& b) {
    return a.input_layer == b.input_layer && a.source_input_layer == b.source_input_layer &&
           a.source_output_layer == b.source_output_layer && a.transposed == b.transposed;
}

bool operator==(const FixedWeights& a, const FixedWeights& b) {
    return a.source == b.source && a.fit == b.fit && a.lambda == b.lambda && a.scale == b.scale &&
           a.in_training == b.in_training && a.k == b.k && a.ideal_weight == b.ideal_weight &&
           a.user_exponent == b.user_exponent && a.item_exponent == b.item_exponent &&
           a.indicator == b.indicator && a.popularity_exponent == b.popularity_exponent;
}

// Layers are equal when they behave the same: activation parameters are compared where the
// activation uses them, the sparseness penalty where it applies (as to_json writes them).
bool operator==(const LayerConfig& a, const LayerConfig& b) {
    const Activation act = a.activation;
    const bool slope = act == Activation::kLeakyRectifiedLinear;
    const bool alpha =
        act == Activation::kExponentialLinear || act == Activation::kScaledExponentialLinear;
    const bool lambda = act == Activation::kScaledExponentialLinear;
    const bool penalty = a.kind == LayerKind::kHidden && a.sparse;
    return a.name == b.name && a.kind == b.kind && a.n == b.n && a.n_auto == b.n_auto &&
           a.sparse == b.sparse && a.dataset == b.dataset && a.sources == b.sources &&
           a.skips == b.skips && a.shared_weights == b.shared_weights &&
           a.fixed_weights == b.fixed_weights && a.activation == b.activation &&
           (!slope || a.relu_slope == b.relu_slope) && (!alpha || a.elu_alpha == b.elu_alpha) &&
           (!lambda || a.selu_lambda == b.selu_lambda) && a.p_dropout == b.p_dropout &&
           a.normalize_l2 == b.normalize_l2 && a.weight_init == b.weight_init &&
           a.weight_norm == b.weight_norm && a.delta_norm == b.delta_norm &&
           (!penalty || a.sparseness_penalty == b.sparseness_penalty);
}

bool operator==(const SmceParams& a, const SmceParams& b) {
    return a.one_target == b.one_target && a.zero_target == b.zero_target &&
           a.one_scale == b.one_scale && a.zero_scale == b.zero_scale;
}

bool operator==(const NetworkConfig& a, const NetworkConfig& b) {
    return a.version == b.version && a.name == b.name && a.kind == b.kind &&
           a.error_function == b.error_function && a.smce == b.smce &&
           a.denoising_p == b.denoising_p && a.sparseness_penalty == b.sparseness_penalty &&
           a.delta_boost_one == b.delta_boost_one && a.delta_boost_zero == b.delta_boost_zero &&
           a.activation_defaults == b.activation_defaults &&
           a.shuffle_indices == b.shuffle_indices && a.decay == b.decay &&
           a.training == b.training && a.layers == b.layers;
}

bool operator==(const TrainingConfig& a, const TrainingConfig& b) {
    return a.optimizer == b.optimizer && a.epochs == b.epochs && a.batch == b.batch &&
           a.seed == b.seed && a.precision == b.precision;
}

namespace config {

std::string json_string(const std::string& s) {
    std::string r = "\"";
    for (char c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        switch (c) {
            case '"':
                r += "\\\"";
                break;
            case '\\':
                r += "\\\\";
                break;
            case '\b':
                r += "\\b";
                break;
            case '\f':
                r += "\\f";
                break;
            case '\n':
                r += "\\n";
                break;
            case '\r':
                r += "\\r";
                break;
            case '\t':
                r += "\\t";
                break;
            default:
                if (u < 0x20 || u == 0x7f) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", u);
                    r += buf;
                } else {
                    r += c;
                }
        }
    }
    return r + "\"";
}

}  // namespace config

namespace {

using config::json_string;

// Shortest decimal text that reads back (through a double, as JsonCpp reads numbers) as exactly
// the same value. Non-finite values cannot be written as JSON numbers: they become null, which
// from_json rejects.
std::string json_double(double d) {
    if (d != d || d - d != 0) return "null";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0";  // JsonCpp reads "-0" as integer 0
    char buf[64];
    for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (std::strtod(buf, nullptr) == d) break;
    }
    return buf;
}

std::string json_float(float f) {
    if (f != f || f - f != 0) return "null";
    if (f == 0) return std::signbit(f) ? "-0.0" : "0";  // JsonCpp reads "-0" as integer 0
    char buf[64];
    for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
        if (static_cast<float>(std::strtod(buf, nullptr)) == f) break;
    }
    return buf;
}

const char* json_bool(bool b) {
    return b ? "true" : "false";
}

std::string sparseness_json(const SparsenessPenalty& s) {
    return "{ \"p\": " + json_float(s.p) + ", \"beta\": " + json_float(s.beta) + " }";
}

std::string layer_json(const LayerConfig& l) {
    std::string r = "{ ";
    r += "\"Name\": " + json_string(l.name);
    r += std::string(", \"Kind\": \"") + to_string(l.kind) + "\"";
    r += ", \"Type\": \"FullyConnected\"";
    r += ", \"N\": " + (l.n_auto ? std::string("\"auto\"") : std::to_string(l.n));
    r += std::string(", \"Sparse\": ") + json_bool(l.sparse);
    if (l.kind != LayerKind::kHidden) r += ", \"DataSet\": " + json_string(l.dataset);
    if (l.kind != LayerKind::kInput) {
        r += ", \"Source\": [";
        for (size_t i = 0; i < l.sources.size(); ++i) {
            if (i > 0) r += ", ";
            r += json_string(l.sources[i]);
        }
        r += "]";
        // Written only when present: an empty list is not valid input.
        if (!l.skips.empty()) {
            r += ", \"Skip\": [";
            for (size_t i = 0; i < l.skips.size(); ++i) {
                r += (i > 0 ? ", " : "") + json_string(l.skips[i]);
            }
            r += "]";
        }
        if (!l.shared_weights.empty()) {
            r += ", \"SharedWeights\": [";
            for (size_t i = 0; i < l.shared_weights.size(); ++i) {
                const SharedWeights& s = l.shared_weights[i];
                r += std::string(i > 0 ? ", " : "") +
                     "{ \"InputLayer\": " + json_string(s.input_layer) +
                     ", \"SourceInputLayer\": " + json_string(s.source_input_layer) +
                     ", \"SourceOutputLayer\": " + json_string(s.source_output_layer) +
                     ", \"Transposed\": " + json_bool(s.transposed) + " }";
            }
            r += "]";
        }
        if (!l.fixed_weights.empty()) {
            r += ", \"FixedWeights\": [";
            for (size_t i = 0; i < l.fixed_weights.size(); ++i) {
                const FixedWeights& fw = l.fixed_weights[i];
                r += std::string(i > 0 ? ", " : "") + "{ \"Source\": " + json_string(fw.source);
                if (fw.fit == LinearFit::kEase) {
                    r += ", \"Fit\": \"EASE\", \"Lambda\": " + json_float(fw.lambda);
                } else {
                    r += ", \"Fit\": \"GraphFilter\", \"K\": " + std::to_string(fw.k) +
                         ", \"IdealWeight\": " + json_float(fw.ideal_weight) +
                         ", \"UserExponent\": " + json_float(fw.user_exponent) +
                         ", \"ItemExponent\": " + json_float(fw.item_exponent);
                }
                r += ", \"Scale\": " + json_float(fw.scale) +
                     ", \"InTraining\": " + json_bool(fw.in_training);
                // Written only when set: the JSON of every earlier model file stays as it was.
                if (fw.indicator) r += ", \"Indicator\": true";
                if (fw.popularity_exponent != 0.0f) {
                    r += ", \"PopularityExponent\": " + json_float(fw.popularity_exponent);
                }
                r += " }";
            }
            r += "]";
        }
        r += std::string(", \"Activation\": \"") + to_string(l.activation) + "\"";
        // Only the parameters the activation uses; the others equal the network's values.
        if (l.activation == Activation::kLeakyRectifiedLinear) {
            r += ", \"RELUSlope\": " + json_float(l.relu_slope);
        }
        if (l.activation == Activation::kExponentialLinear ||
            l.activation == Activation::kScaledExponentialLinear) {
            r += ", \"ELUAlpha\": " + json_float(l.elu_alpha);
        }
        if (l.activation == Activation::kScaledExponentialLinear) {
            r += ", \"SELULambda\": " + json_float(l.selu_lambda);
        }
    }
    if (l.kind != LayerKind::kOutput) r += ", \"pDropout\": " + json_float(l.p_dropout);
    if (l.kind == LayerKind::kInput && l.normalize_l2 > 0.0f) {
        r += ", \"Normalize\": { \"Norm\": \"L2\", \"Scale\": " + json_float(l.normalize_l2) + " }";
    }
    if (l.kind != LayerKind::kInput) {
        r += std::string(", \"WeightInit\": { \"Scheme\": \"") + to_string(l.weight_init.scheme) +
             "\", \"Scale\": " + json_float(l.weight_init.scale) +
             ", \"Bias\": " + json_float(l.weight_init.bias) + " }";
        r += ", \"WeightNorm\": " + json_float(l.weight_norm);
        r += ", \"DeltaNorm\": " + json_float(l.delta_norm);
    }
    // Written where it applies; elsewhere the layer's value is the network's.
    if (l.kind == LayerKind::kHidden && l.sparse) {
        r += ", \"SparsenessPenalty\": " + sparseness_json(l.sparseness_penalty);
    }
    return r + " }";
}

// The spelling of $.Training.Optimizer's values (docs/config-reference.md).
const char* optimizer_json(OptimizerKind k) {
    switch (k) {
        case OptimizerKind::kSgd:
            return "SGD";
        case OptimizerKind::kMomentum:
            return "Momentum";
        case OptimizerKind::kNesterov:
            return "Nesterov";
        case OptimizerKind::kAdaGrad:
            return "AdaGrad";
        case OptimizerKind::kRmsProp:
            return "RMSProp";
        case OptimizerKind::kAdaDelta:
            return "AdaDelta";
        case OptimizerKind::kAdam:
            return "Adam";
        case OptimizerKind::kAdamW:
            return "AdamW";
    }
    return "Unknown";
}

// Every key explicit, except Epsilon, which is written only when given (its default depends on
// the optimizer, which a command line may change).
std::string training_json(const TrainingConfig& t) {
    const OptimizerOptions& o = t.optimizer;
    std::string r = std::string("{ \"Optimizer\": \"") + optimizer_json(o.kind) + "\"";
    r += ", \"Alpha\": " + json_float(o.learning_rate);
    r += ", \"Mu\": " + json_float(o.mu);
    r += ", \"Mu1\": " + json_float(o.mu1);
    if (o.epsilon) r += ", \"Epsilon\": " + json_float(*o.epsilon);
    r += ", \"Lambda\": " + json_float(o.l2);
    r += ", \"Lambda1\": " + json_float(o.l1);
    r += ", \"Epochs\": " + std::to_string(t.epochs);
    r += ", \"BatchSize\": " + std::to_string(t.batch);
    r += ", \"Seed\": " + std::to_string(t.seed);
    r += std::string(", \"SparseUpdates\": \"") +
         (o.sparse_update == SparseUpdate::kLazy ? "Lazy" : "Exact") + "\"";
    if (t.precision) r += std::string(", \"Precision\": \"") + to_string(*t.precision) + "\"";
    return r + " }";
}

}  // namespace

std::string NetworkConfig::to_json() const {
    std::string r = "{\n";
    r += "    \"Version\": " + json_double(version) + ",\n";
    r += "    \"Name\": " + json_string(name) + ",\n";
    r += std::string("    \"Kind\": \"") + to_string(kind) + "\",\n";
    r += std::string("    \"ErrorFunction\": \"") + to_string(error_function) + "\",\n";
    r += "    \"ScaledMarginalCrossEntropy\": { \"oneTarget\": " + json_float(smce.one_target) +
         ", \"zeroTarget\": " + json_float(smce.zero_target) +
         ", \"oneScale\": " + json_float(smce.one_scale) +
         ", \"zeroScale\": " + json_float(smce.zero_scale) + " },\n";
    r += "    \"Denoising\": { \"p\": " + json_float(denoising_p) + " },\n";
    r += "    \"SparsenessPenalty\": " + sparseness_json(sparseness_penalty) + ",\n";
    r += "    \"DeltaBoost\": { \"one\": " + json_float(delta_boost_one) +
         ", \"zero\": " + json_float(delta_boost_zero) + " },\n";
    r += "    \"RELUSlope\": " + json_float(activation_defaults.relu_slope) + ",\n";
    r += "    \"ELUAlpha\": " + json_float(activation_defaults.elu_alpha) + ",\n";
    r += "    \"SELULambda\": " + json_float(activation_defaults.selu_lambda) + ",\n";
    r += std::string("    \"ShuffleIndices\": ") + json_bool(shuffle_indices) + ",\n";
    r += "    \"Decay\": " + json_float(decay) + ",\n";
    if (training) r += "    \"Training\": " + training_json(*training) + ",\n";
    r += "    \"Layers\": [";
    for (size_t i = 0; i < layers.size(); ++i) {
        r += i > 0 ? ",\n        " : "\n        ";
        r += layer_json(layers[i]);
    }
    r += layers.empty() ? "]\n" : "\n    ]\n";
    return r + "}\n";
}

}  // namespace sparsenet
