// NetworkConfig::from_json / from_file: parse and validate DSSTNE's JSON network language.
//
// Rules (see docs/config-reference.md):
//  * keys and enum string values match case-insensitively; two keys of one object that differ
//    only by case are an error;
//  * every key of DSSTNE's language that this version does not implement yet is rejected with
//    ErrorCategory::kNotImplemented ("not implemented yet: <Key>"), never silently ignored;
//  * any other unknown key is a kConfig error that lists the valid keys at that level;
//  * messages read "<source>: <json path>: <what is wrong>; expected <what>".

#include <json/json.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sparsenet/config.h"

#include "config/json_text.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

// ---- small string helpers ----

std::string lower(const std::string& s) {
    std::string r = s;
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

bool iequals(const std::string& a, const std::string& b) {
    return lower(a) == lower(b);
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
    std::string r;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) r += sep;
        r += items[i];
    }
    return r;
}

// Names and values in messages are quoted exactly as JSON writes them.
std::string quote(const std::string& s) {
    return config::json_string(s);
}

// Shortest %g form that reads back as the same double.
std::string format_number(double d) {
    char buf[64];
    for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (std::strtod(buf, nullptr) == d) break;
    }
    return buf;
}

// "found ..." text for a JSON value: its type and (for scalars) the value.
std::string describe(const Json::Value& v) {
    switch (v.type()) {
        case Json::nullValue:
            return "null";
        case Json::booleanValue:
            return v.asBool() ? "boolean true" : "boolean false";
        case Json::intValue:
            return "integer " + std::to_string(v.asLargestInt());
        case Json::uintValue:
            return "integer " + std::to_string(v.asLargestUInt());
        case Json::realValue:
            return "number " + format_number(v.asDouble());
        case Json::stringValue: {
            std::string s = v.asString();
            if (s.size() > 60) s = s.substr(0, 57) + "...";
            return "string " + quote(s);
        }
        case Json::arrayValue:
            return "array of " + std::to_string(v.size()) + " element(s)";
        case Json::objectValue:
            return "object";
    }
    return "unknown value";
}

// ---- errors ----

struct Ctx {
    const std::string& source;
};

[[noreturn]] void fail(const Ctx& ctx, const std::string& path, const std::string& what,
                       const std::string& expected) {
    throw Error(ErrorCategory::kConfig,
                ctx.source + ": " + path + ": " + what + "; expected " + expected);
}

[[noreturn]] void not_implemented(const Ctx& ctx, const std::string& path,
                                  const std::string& what) {
    throw Error(ErrorCategory::kNotImplemented,
                ctx.source + ": " + path + ": not implemented yet: " + what);
}

[[noreturn]] void wrong_type(const Ctx& ctx, const std::string& path, const Json::Value& v,
                             const std::string& expected) {
    fail(ctx, path, "wrong type: found " + describe(v), expected);
}

// ---- one JSON object with case-insensitive keys ----

struct Field {
    const Json::Value* value = nullptr;  // nullptr: key absent
    std::string path;                    // JSON path of the key as written in the document
    explicit operator bool() const { return value != nullptr; }
};

class ObjectView {
  public:
    // Checks every key of `obj` (which must be an object): differing-only-by-case duplicates and
    // unknown keys are kConfig errors, keys in `not_impl` are kNotImplemented errors.
    ObjectView(const Ctx& ctx, const Json::Value& obj, std::string path,
               std::vector<std::string> valid, const std::vector<std::string>& not_impl,
               const std::string& what)
        : ctx_(ctx), obj_(obj), path_(std::move(path)), valid_(std::move(valid)) {
        if (!obj.isObject()) wrong_type(ctx, path_, obj, what);
        std::map<std::string, std::string> seen;  // lower-case -> key as written
        for (const std::string& key : obj.getMemberNames()) {
            std::string low = lower(key);
            auto it = seen.find(low);
            if (it != seen.end()) {
                fail(ctx, path_,
                     "keys " + quote(it->second) + " and " + quote(key) + " differ only by case",
                     "each key at most once (keys are case-insensitive)");
            }
            seen.emplace(low, key);
            bool known = false;
            for (const std::string& v : valid_) known = known || lower(v) == low;
            bool unimplemented = false;
            for (const std::string& v : not_impl) unimplemented = unimplemented || lower(v) == low;
            if (!known && !unimplemented) {
                fail(ctx, child(key), "unknown key " + quote(key),
                     "one of the keys valid here: " + join(valid_));
            }
        }
        for (const auto& [low, key] : seen) {
            for (const std::string& v : not_impl) {
                if (lower(v) == low) not_implemented(ctx, child(key), v);
            }
            actual_.emplace(low, key);
        }
    }

    std::string child(const std::string& key) const { return path_ + "." + key; }
    const std::string& path() const { return path_; }

    Field get(const std::string& canonical) const {
        Field f;
        auto it = actual_.find(lower(canonical));
        if (it == actual_.end()) {
            f.path = child(canonical);
            return f;
        }
        f.value = &obj_[it->second];
        f.path = child(it->second);
        return f;
    }

  private:
    const Ctx& ctx_;
    const Json::Value& obj_;
    std::string path_;
    std::vector<std::string> valid_;
    std::map<std::string, std::string> actual_;  // lower-case -> key as written
};

// ---- typed values ----

double get_number(const Ctx& ctx, const Field& f, const std::string& expected) {
    const Json::Value& v = *f.value;
    if (v.type() != Json::intValue && v.type() != Json::uintValue && v.type() != Json::realValue) {
        wrong_type(ctx, f.path, v, expected);
    }
    double d = v.asDouble();
    if (!std::isfinite(d)) fail(ctx, f.path, "value " + describe(v) + " is not finite", expected);
    return d;
}

// Doubles below this magnitude round to a finite float (FLT_MAX plus half of its ulp).
constexpr double kFloatLimit = static_cast<double>(FLT_MAX) + 0x1p103;
constexpr double kInf = std::numeric_limits<double>::infinity();

float to_float(const Ctx& ctx, const Field& f, double d, const std::string& expected) {
    if (!(std::fabs(d) < kFloatLimit)) {
        fail(ctx, f.path, "value " + format_number(d) + " does not fit a 32-bit float", expected);
    }
    return static_cast<float>(d);
}

// A float in [lo, hi] (or [lo, hi) when hi_open).
float get_float_in(const Ctx& ctx, const Field& f, double lo, double hi, bool hi_open,
                   const std::string& expected) {
    double d = get_number(ctx, f, expected);
    if (d < lo || (hi_open ? d >= hi : d > hi)) {
        fail(ctx, f.path, "value " + format_number(d) + " is out of range", expected);
    }
    return to_float(ctx, f, d, expected);
}

float get_float(const Ctx& ctx, const Field& f, const std::string& expected) {
    return to_float(ctx, f, get_number(ctx, f, expected), expected);
}

std::string get_string(const Ctx& ctx, const Field& f, const std::string& expected,
                       bool allow_empty = true) {
    if (!f.value->isString()) wrong_type(ctx, f.path, *f.value, expected);
    std::string s = f.value->asString();
    if (!allow_empty && s.empty()) fail(ctx, f.path, "empty string", expected);
    return s;
}

bool get_bool(const Ctx& ctx, const Field& f) {
    if (!f.value->isBool()) wrong_type(ctx, f.path, *f.value, "a boolean (true or false)");
    return f.value->asBool();
}

// ---- enumerations ----

template <typename E>
struct EnumName {
    const char* name;
    E value;
};

// Matches a string value case-insensitively against `names`; values in `not_impl` (DSSTNE's,
// not implemented yet) give kNotImplemented "<Key> <Value>".
template <typename E>
E get_enum(const Ctx& ctx, const Field& f, const std::string& key,
           const std::vector<EnumName<E>>& names, const std::vector<std::string>& not_impl,
           const std::string& expected) {
    std::string s = get_string(ctx, f, "a string, one of " + expected);
    for (const auto& n : names) {
        if (iequals(s, n.name)) return n.value;
    }
    for (const std::string& n : not_impl) {
        if (iequals(s, n)) not_implemented(ctx, f.path, key + " " + n);
    }
    fail(ctx, f.path, "unknown value " + quote(s), "one of " + expected);
}

const std::vector<EnumName<LayerKind>> kLayerKinds = {
    {"Input", LayerKind::kInput}, {"Hidden", LayerKind::kHidden}, {"Output", LayerKind::kOutput}};
const char* const kLayerKindList = "Input, Hidden, Output";

const std::vector<EnumName<Activation>> kActivations = {
    {"Sigmoid", Activation::kSigmoid},
    {"Tanh", Activation::kTanh},
    {"Linear", Activation::kLinear},
    {"RectifiedLinear", Activation::kRectifiedLinear},
    {"Relu", Activation::kRectifiedLinear},
    {"LeakyRectifiedLinear", Activation::kLeakyRectifiedLinear},
    {"LRelu", Activation::kLeakyRectifiedLinear},
    {"ExponentialLinear", Activation::kExponentialLinear},
    {"Elu", Activation::kExponentialLinear},
    {"ScaledExponentialLinear", Activation::kScaledExponentialLinear},
    {"Selu", Activation::kScaledExponentialLinear},
    {"SoftPlus", Activation::kSoftPlus},
    {"SoftSign", Activation::kSoftSign},
    {"SoftMax", Activation::kSoftMax}};
const char* const kActivationList =
    "Sigmoid, Tanh, Linear, RectifiedLinear (alias Relu), LeakyRectifiedLinear (alias LRelu), "
    "ExponentialLinear (alias Elu), ScaledExponentialLinear (alias Selu), SoftPlus, SoftSign, "
    "SoftMax";
const std::vector<std::string> kActivationsNotImpl = {"ReluMax", "LinearMax"};

const std::vector<EnumName<ErrorFunction>> kErrorFunctions = {
    {"L1", ErrorFunction::kL1},
    {"L2", ErrorFunction::kL2},
    {"L2Hinge", ErrorFunction::kL2Hinge},
    {"Hinge", ErrorFunction::kHinge},
    {"CrossEntropy", ErrorFunction::kCrossEntropy},
    {"Cross Entropy", ErrorFunction::kCrossEntropy},
    {"ScaledMarginalCrossEntropy", ErrorFunction::kScaledMarginalCrossEntropy},
    {"DataScaledMarginalCrossEntropy", ErrorFunction::kDataScaledMarginalCrossEntropy}};
const char* const kErrorFunctionList =
    "L1, L2, L2Hinge, Hinge, CrossEntropy (alias \"Cross Entropy\"), ScaledMarginalCrossEntropy, "
    "DataScaledMarginalCrossEntropy";

const std::vector<EnumName<WeightInitScheme>> kSchemes = {
    {"Xavier", WeightInitScheme::kXavier},     {"CaffeXavier", WeightInitScheme::kCaffeXavier},
    {"Gaussian", WeightInitScheme::kGaussian}, {"Uniform", WeightInitScheme::kUniform},
    {"UnitBall", WeightInitScheme::kUnitBall}, {"Constant", WeightInitScheme::kConstant},
    {"SELU", WeightInitScheme::kSelu}};
const char* const kSchemeList = "Xavier, CaffeXavier, Gaussian, Uniform, UnitBall, Constant, SELU";

const std::vector<EnumName<OptimizerKind>> kOptimizers = {
    {"SGD", OptimizerKind::kSgd},           {"Momentum", OptimizerKind::kMomentum},
    {"Nesterov", OptimizerKind::kNesterov}, {"AdaGrad", OptimizerKind::kAdaGrad},
    {"RMSProp", OptimizerKind::kRmsProp},   {"AdaDelta", OptimizerKind::kAdaDelta},
    {"Adam", OptimizerKind::kAdam},         {"AdamW", OptimizerKind::kAdamW}};
const char* const kOptimizerList =
    "SGD, Momentum, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam, AdamW";

const std::vector<EnumName<SparseUpdate>> kSparseUpdates = {{"Exact", SparseUpdate::kExact},
                                                            {"Lazy", SparseUpdate::kLazy}};
const char* const kSparseUpdateList = "Exact, Lazy";

const std::vector<EnumName<Precision>> kPrecisions = {
    {"fp32", Precision::kFp32}, {"tf32", Precision::kTf32}, {"bf16", Precision::kBf16}};
const char* const kPrecisionList = "fp32, tf32, bf16";

const std::vector<EnumName<NetworkKind>> kNetworkKinds = {
    {"FeedForward", NetworkKind::kFeedForward}, {"AutoEncoder", NetworkKind::kAutoEncoder}};
const char* const kNetworkKindList = "FeedForward, AutoEncoder";
const std::vector<std::string> kLayerTypes = {"FullyConnected"};
const std::vector<std::string> kLayerTypesNotImpl = {"Convolutional", "Pooling"};
const std::vector<std::string> kLayerKindsNotImpl = {"Target"};

// ---- key sets ----

// Keys that are aliases of one key (DSSTNE accepts either spelling).
const std::vector<std::string> kSlopeKeys = {"RELUSlope", "Slope"};
const std::vector<std::string> kSmceObjectKeys = {"ScaledMarginalCrossEntropy",
                                                  "DataScaledMarginalCrossEntropy"};

const std::vector<std::string> kTopKeys = {"Version",
                                           "Name",
                                           "Kind",
                                           "ErrorFunction",
                                           "ScaledMarginalCrossEntropy",
                                           "DataScaledMarginalCrossEntropy",
                                           "Denoising",
                                           "SparsenessPenalty",
                                           "DeltaBoost",
                                           "RELUSlope",
                                           "Slope",
                                           "ELUAlpha",
                                           "SELULambda",
                                           "ShuffleIndices",
                                           "Decay",
                                           "Training",
                                           "Layers"};
const std::vector<std::string> kTopNotImpl = {"WeightsData", "LocalResponseNormalization", "LRN",
                                              "Maxout"};
const std::vector<std::string> kTrainingKeys = {
    "Optimizer", "Alpha",  "Mu",        "Mu1",  "Epsilon",       "Lambda",
    "Lambda1",   "Epochs", "BatchSize", "Seed", "SparseUpdates", "Precision"};
const std::vector<std::string> kLayerKeys = {
    "Name",          "Kind",       "Type",      "N",
    "Sparse",        "DataSet",    "Source",    "Skip",
    "SharedWeights", "Activation", "RELUSlope", "Slope",
    "ELUAlpha",      "SELULambda", "pDropout",  "Normalize",
    "WeightInit",    "WeightNorm", "DeltaNorm", "SparsenessPenalty",
    "FixedWeights"};
const std::vector<std::string> kLayerNotImpl = {"Kernel", "KernelStride", "BatchNormalization",
                                                "Function"};
const std::vector<std::string> kSharedWeightsKeys = {"InputLayer", "SourceInputLayer",
                                                     "SourceOutputLayer", "Transposed"};
const std::vector<std::string> kFixedWeightsKeys = {
    "Source",      "Fit",          "Lambda",       "Scale",     "InTraining",        "K",
    "IdealWeight", "UserExponent", "ItemExponent", "Indicator", "PopularityExponent"};
const std::vector<EnumName<LinearFit>> kLinearFits = {{"EASE", LinearFit::kEase},
                                                      {"GraphFilter", LinearFit::kGraphFilter}};
const std::vector<std::string> kSmceKeys = {"oneTarget", "zeroTarget", "oneScale", "zeroScale"};
const std::vector<std::string> kDenoisingKeys = {"p"};
const std::vector<std::string> kDeltaBoostKeys = {"one", "zero"};
const std::vector<std::string> kSparsenessKeys = {"p", "beta"};
const std::vector<std::string> kWeightInitKeys = {"Scheme", "Scale", "Bias"};
const std::vector<std::string> kNormalizeKeys = {"Norm", "Scale"};
const std::vector<std::string> kNorms = {"L2"};
const std::vector<std::string> kNone = {};

template <typename E>
std::vector<std::string> names_of(const std::vector<EnumName<E>>& names) {
    std::vector<std::string> r;
    for (const auto& n : names) r.push_back(n.name);
    return r;
}

// ---- sections ----

SmceParams parse_smce(const Ctx& ctx, const Field& f) {
    ObjectView o(ctx, *f.value, f.path, kSmceKeys, kNone,
                 "an object with keys oneTarget, zeroTarget, oneScale, zeroScale");
    SmceParams p;
    const char* target = "a number in [0, 1]";
    const char* scale = "a number >= 0";
    if (Field g = o.get("oneTarget")) p.one_target = get_float_in(ctx, g, 0, 1, false, target);
    if (Field g = o.get("zeroTarget")) p.zero_target = get_float_in(ctx, g, 0, 1, false, target);
    if (Field g = o.get("oneScale")) p.one_scale = get_float_in(ctx, g, 0, kInf, false, scale);
    if (Field g = o.get("zeroScale")) p.zero_scale = get_float_in(ctx, g, 0, kInf, false, scale);
    return p;
}

// {p, beta}; absent keys keep the values of `base` (the network's, for a layer's override).
SparsenessPenalty parse_sparseness(const Ctx& ctx, const Field& f, SparsenessPenalty base) {
    ObjectView o(ctx, *f.value, f.path, kSparsenessKeys, kNone, "an object with keys p, beta");
    if (Field g = o.get("p")) base.p = get_float_in(ctx, g, 0, 1, false, "a number in [0, 1]");
    if (Field g = o.get("beta")) base.beta = get_float_in(ctx, g, 0, kInf, false, "a number >= 0");
    return base;
}

// The one of `aliases` present in `o` (DSSTNE accepts either spelling); both present is an error.
Field get_alias(const Ctx& ctx, const ObjectView& o, const std::vector<std::string>& aliases) {
    Field found;
    for (const std::string& a : aliases) {
        Field f = o.get(a);
        if (!f) continue;
        if (found) {
            fail(ctx, o.path(),
                 "keys " + quote(found.path.substr(o.path().size() + 1)) + " and " +
                     quote(f.path.substr(o.path().size() + 1)) + " are two spellings of one key",
                 "at most one of " + join(aliases));
        }
        found = f;
    }
    if (!found) found.path = o.child(aliases.front());
    return found;
}

// Activation parameters: RELUSlope (alias Slope) >= 0, ELUAlpha >= 0, SELULambda > 0.
void parse_activation_params(const Ctx& ctx, const ObjectView& o, float& slope, float& alpha,
                             float& lambda) {
    if (Field f = get_alias(ctx, o, kSlopeKeys)) {
        slope = get_float_in(ctx, f, 0, kInf, false, "a number >= 0 (the leaky ReLU slope)");
    }
    if (Field f = o.get("ELUAlpha")) {
        alpha = get_float_in(ctx, f, 0, kInf, false, "a number >= 0");
    }
    if (Field f = o.get("SELULambda")) {
        const char* expected = "a number > 0";
        lambda = get_float(ctx, f, expected);
        if (!(lambda > 0.0f)) {
            fail(ctx, f.path, "value " + format_number(lambda) + " is out of range", expected);
        }
    }
}

// A whole number in [lo, hi]: an integer, or a number with an integral value (4.0 but not 2.5).
uint64_t get_count(const Ctx& ctx, const Field& f, uint64_t lo, uint64_t hi,
                   const std::string& expected) {
    const Json::Value& v = *f.value;
    uint64_t n = 0;
    if (v.type() == Json::intValue || v.type() == Json::uintValue) {
        if (!v.isUInt64()) fail(ctx, f.path, "value " + describe(v) + " is out of range", expected);
        n = v.asUInt64();
    } else {
        const double d = get_number(ctx, f, expected);
        if (std::floor(d) != d) {
            fail(ctx, f.path, "value " + format_number(d) + " is not an integer", expected);
        }
        if (d < 0 || d >= 18446744073709551616.0) {
            fail(ctx, f.path, "value " + format_number(d) + " is out of range", expected);
        }
        n = static_cast<uint64_t>(d);
    }
    if (n < lo || n > hi) {
        fail(ctx, f.path, "value " + std::to_string(n) + " is out of range", expected);
    }
    return n;
}

// $.Training: every key optional, sparsenet's defaults otherwise (TrainingConfig).
TrainingConfig parse_training(const Ctx& ctx, const Field& f) {
    ObjectView o(ctx, *f.value, f.path, kTrainingKeys, kNone,
                 "an object (the Training section) with keys " + join(kTrainingKeys));
    TrainingConfig t;
    OptimizerOptions& opt = t.optimizer;
    // A float in [0, 1): checked again after the rounding to float (0.99999999 rounds to 1).
    auto rate = [&](const Field& g) {
        const char* expected = "a number in [0, 1)";
        const float v = get_float_in(ctx, g, 0, 1, true, expected);
        if (!(v < 1.0f)) fail(ctx, g.path, "value " + format_number(v) + " rounds to 1", expected);
        return v;
    };
    if (Field g = o.get("Optimizer")) {
        opt.kind = get_enum(ctx, g, "Optimizer", kOptimizers, kNone, kOptimizerList);
    }
    if (Field g = o.get("Alpha")) {
        opt.learning_rate = get_float_in(ctx, g, 0, kInf, false, "a number >= 0 (learning rate)");
    }
    if (Field g = o.get("Mu")) opt.mu = rate(g);
    if (Field g = o.get("Mu1")) opt.mu1 = rate(g);
    if (Field g = o.get("Epsilon")) {
        const char* expected = "a number > 0";
        const float e = get_float(ctx, g, expected);
        if (!(e > 0.0f))
            fail(ctx, g.path, "value " + format_number(e) + " is out of range", expected);
        opt.epsilon = e;
    }
    if (Field g = o.get("Lambda")) opt.l2 = get_float_in(ctx, g, 0, kInf, false, "a number >= 0");
    if (Field g = o.get("Lambda1")) opt.l1 = get_float_in(ctx, g, 0, kInf, false, "a number >= 0");
    if (Field g = o.get("SparseUpdates")) {
        opt.sparse_update =
            get_enum(ctx, g, "SparseUpdates", kSparseUpdates, kNone, kSparseUpdateList);
    }
    if (Field g = o.get("Precision")) {
        t.precision = get_enum(ctx, g, "Precision", kPrecisions, kNone, kPrecisionList);
    }
    if (Field g = o.get("Epochs")) {
        t.epochs = static_cast<uint32_t>(
            get_count(ctx, g, 0, UINT32_MAX, "an integer in [0, 4294967295] (epochs)"));
    }
    if (Field g = o.get("BatchSize")) {
        t.batch = static_cast<uint32_t>(
            get_count(ctx, g, 1, UINT32_MAX, "an integer in [1, 4294967295] (examples per batch)"));
    }
    if (Field g = o.get("Seed")) {
        t.seed = get_count(ctx, g, 0, UINT64_MAX, "an integer in [0, 18446744073709551615]");
    }
    return t;
}

// "Normalize": { "Norm": "L2", "Scale": s } -> s (the L2 norm every input row is scaled to).
float parse_normalize(const Ctx& ctx, const Field& f) {
    ObjectView o(ctx, *f.value, f.path, kNormalizeKeys, kNone, "an object with keys Norm, Scale");
    Field norm = o.get("Norm");
    if (!norm) {
        fail(ctx, f.path, "Normalize has no Norm", "\"Norm\": \"L2\"");
    }
    get_enum(ctx, norm, "Norm", std::vector<EnumName<int>>{{"L2", 0}}, kNone, "L2");
    float scale = 1.0f;
    if (Field g = o.get("Scale")) {
        const std::string expected = "a number > 0 (the L2 norm of every input row)";
        const double d = get_number(ctx, g, expected);
        if (!(d > 0.0))
            fail(ctx, g.path, "value " + format_number(d) + " is out of range", expected);
        scale = to_float(ctx, g, d, expected);
    }
    return scale;
}

WeightInit parse_weight_init(const Ctx& ctx, const Field& f) {
    ObjectView o(ctx, *f.value, f.path, kWeightInitKeys, kNone,
                 "an object with keys Scheme, Scale, Bias");
    WeightInit w;
    if (Field g = o.get("Scheme")) {
        w.scheme = get_enum(ctx, g, "Scheme", kSchemes, kNone, kSchemeList);
    }
    if (Field g = o.get("Scale")) {
        if (w.scheme == WeightInitScheme::kConstant) {
            w.scale = get_float(ctx, g, "a number (the constant weight value)");
        } else {
            w.scale = get_float_in(ctx, g, 0, kInf, false,
                                   "a number >= 0 (negative scales are only allowed with Scheme "
                                   "Constant)");
        }
    }
    if (Field g = o.get("Bias")) w.bias = get_float(ctx, g, "a number (the initial bias)");
    return w;
}

// N: positive integer, [n] or "auto". Arrays of 2..4 positive integers are DSSTNE's
// multi-dimensional layers: not implemented yet.
void parse_n(const Ctx& ctx, const Field& f, LayerKind kind, LayerConfig& layer) {
    const std::string expected = "a positive integer, a 1-element array [n] or \"auto\"";
    const std::string int_expected = "a positive integer (at most 4294967295)";
    auto as_count = [&](const Json::Value& v, const std::string& path) -> uint32_t {
        Field e{&v, path};
        double d = get_number(ctx, e, int_expected);
        if (std::floor(d) != d) {
            fail(ctx, path, "value " + format_number(d) + " is not an integer", int_expected);
        }
        if (d < 1 || d > 4294967295.0) {
            fail(ctx, path, "value " + format_number(d) + " is out of range", int_expected);
        }
        return static_cast<uint32_t>(d);
    };
    const Json::Value& v = *f.value;
    if (v.isString()) {
        if (!iequals(v.asString(), "auto")) {
            fail(ctx, f.path, "unknown value " + quote(v.asString()), expected);
        }
        if (kind == LayerKind::kHidden) {
            fail(ctx, f.path,
                 "\"auto\" is not allowed on Hidden layers (only Input and Output "
                 "layers take their size from a dataset)",
                 int_expected);
        }
        layer.n_auto = true;
        layer.n = 0;
        return;
    }
    if (v.isArray()) {
        if (v.empty() || v.size() > 4) {
            fail(ctx, f.path, "array of " + std::to_string(v.size()) + " element(s)",
                 "a positive integer or an array of 1 to 4 positive integers");
        }
        std::vector<std::string> dims;
        for (Json::ArrayIndex i = 0; i < v.size(); ++i) {
            uint32_t n = as_count(v[i], f.path + "[" + std::to_string(i) + "]");
            dims.push_back(std::to_string(n));
            layer.n = n;
        }
        if (v.size() > 1) {
            not_implemented(ctx, f.path, "N [" + join(dims) + "] (multi-dimensional layers)");
        }
        return;
    }
    if (!v.isNumeric()) wrong_type(ctx, f.path, v, expected);
    layer.n = as_count(v, f.path);
}

// A layer as parsed, with the information the cross-layer checks need.
struct ParsedLayer {
    LayerConfig config;
    bool has_name = false;
    std::string path;                       // $.Layers[i]
    std::vector<std::string> source_paths;  // JSON path of each entry of config.sources
    bool default_source = false;            // no Source key: the previous layer
    std::string activation_path;            // JSON path of the Activation key, if present
    std::vector<std::string> skip_paths;    // JSON path of each entry of config.skips
    std::vector<std::string> shared_paths;  // JSON path of each entry of config.shared_weights
    std::vector<std::string> fixed_paths;   // JSON path of each entry of config.fixed_weights
};

// A string or a non-empty array of non-empty strings (Source, Skip): appended to `names`, with
// the JSON path of each to `paths`.
void parse_names(const Ctx& ctx, const Field& f, std::vector<std::string>& names,
                 std::vector<std::string>& paths) {
    const std::string expected = "a layer name or a non-empty array of layer names";
    const Json::Value& s = *f.value;
    if (s.isString()) {
        names.push_back(get_string(ctx, f, expected, false));
        paths.push_back(f.path);
    } else if (s.isArray()) {
        if (s.empty()) fail(ctx, f.path, "empty array", expected);
        for (Json::ArrayIndex i = 0; i < s.size(); ++i) {
            Field e{&s[i], f.path + "[" + std::to_string(i) + "]"};
            names.push_back(get_string(ctx, e, "a non-empty string (a layer name)", false));
            paths.push_back(e.path);
        }
    } else {
        wrong_type(ctx, f.path, s, expected);
    }
}

// One SharedWeights entry: {InputLayer, SourceInputLayer, SourceOutputLayer, Transposed}; the
// three names are required (DSSTNE cannot match an entry without them), Transposed is false by
// default.
SharedWeights parse_shared_entry(const Ctx& ctx, const Field& f) {
    ObjectView o(ctx, *f.value, f.path, kSharedWeightsKeys, kNone,
                 "an object with keys InputLayer, SourceInputLayer, SourceOutputLayer, Transposed");
    SharedWeights s;
    auto name = [&](const char* key, std::string& out) {
        Field g = o.get(key);
        if (!g) {
            fail(ctx, g.path, std::string("missing required key ") + key,
                 "a non-empty string (a layer name)");
        }
        out = get_string(ctx, g, "a non-empty string (a layer name)", false);
    };
    name("InputLayer", s.input_layer);
    name("SourceInputLayer", s.source_input_layer);
    name("SourceOutputLayer", s.source_output_layer);
    if (Field g = o.get("Transposed")) s.transposed = get_bool(ctx, g);
    return s;
}

// An object or a non-empty array of objects (SharedWeights, FixedWeights): each parsed by
// `parse_one`, appended to `entries`, its JSON path to `paths`.
template <typename Entry>
void parse_entries(const Ctx& ctx, const Field& f, const std::string& key,
                   Entry (*parse_one)(const Ctx&, const Field&), std::vector<Entry>& entries,
                   std::vector<std::string>& paths) {
    const Json::Value& s = *f.value;
    if (!s.isArray()) {
        entries.push_back(parse_one(ctx, f));
        paths.push_back(f.path);
        return;
    }
    if (s.empty())
        fail(ctx, f.path, "empty array", "a " + key + " object or a non-empty array of them");
    for (Json::ArrayIndex i = 0; i < s.size(); ++i) {
        Field e{&s[i], f.path + "[" + std::to_string(i) + "]"};
        entries.push_back(parse_one(ctx, e));
        paths.push_back(e.path);
    }
}

// One FixedWeights entry: {Source, Fit, Scale, InTraining, Indicator, PopularityExponent} and the
// fit's own keys: Lambda (EASE, required), K, IdealWeight, UserExponent, ItemExponent
// (GraphFilter). Source is required, Fit is EASE, Scale 1 and InTraining true by default; a key
// of the other fit is refused by its path.
FixedWeights parse_fixed_entry(const Ctx& ctx, const Field& f) {
    ObjectView o(ctx, *f.value, f.path, kFixedWeightsKeys, kNone,
                 "an object with keys Source, Fit, Lambda (EASE), K, IdealWeight, UserExponent, "
                 "ItemExponent (GraphFilter), Scale, InTraining, Indicator, "
                 "PopularityExponent");
    FixedWeights w;
    Field source = o.get("Source");
    if (!source) {
        fail(ctx, source.path, "missing required key Source",
             "a non-empty string (an Input layer among this layer's sources)");
    }
    w.source = get_string(ctx, source, "a non-empty string (a layer name)", false);
    if (Field g = o.get("Fit")) {
        w.fit = get_enum(ctx, g, "Fit", kLinearFits, kNone, "EASE or GraphFilter");
    }
    const bool ease = w.fit == LinearFit::kEase;
    for (const char* key : {"Lambda", "K", "IdealWeight", "UserExponent", "ItemExponent"}) {
        const bool ease_key = std::string(key) == "Lambda";
        if (Field g = o.get(key); g && ease_key != ease) {
            fail(ctx, g.path,
                 std::string(key) + " is not a key of Fit " + (ease ? "EASE" : "GraphFilter"),
                 ease ? "Lambda (EASE's keys: Source, Fit, Lambda, Scale, InTraining)"
                      : "K, IdealWeight, UserExponent, ItemExponent (GraphFilter's keys)");
        }
    }
    if (ease) {
        Field lambda = o.get("Lambda");
        const std::string lambda_expected = "a number > 0 (the fit's L2 weight)";
        if (!lambda) fail(ctx, lambda.path, "missing required key Lambda", lambda_expected);
        const double d = get_number(ctx, lambda, lambda_expected);
        if (!(d > 0.0)) {
            fail(ctx, lambda.path, "value " + format_number(d) + " is out of range",
                 lambda_expected);
        }
        w.lambda = to_float(ctx, lambda, d, lambda_expected);
    } else {
        if (Field g = o.get("K")) {
            w.k = uint32_t(get_count(ctx, g, 0, 100000,
                                     "an integer in [0, 100000] (singular vectors; 0: the "
                                     "linear filter alone)"));
        }
        if (Field g = o.get("IdealWeight")) {
            w.ideal_weight = get_float_in(ctx, g, 0, kInf, false, "a number >= 0");
        }
        if (Field g = o.get("UserExponent")) {
            w.user_exponent = get_float_in(ctx, g, 0, 1, false, "a number in [0, 1]");
        }
        if (Field g = o.get("ItemExponent")) {
            w.item_exponent = get_float_in(ctx, g, 0, 1, false, "a number in [0, 1]");
        }
        if (w.ideal_weight > 0.0f && w.k == 0) {
            fail(ctx, o.child("K"), "IdealWeight > 0 needs K",
                 "K > 0 singular vectors for the ideal low-pass part");
        }
    }
    if (Field g = o.get("Scale")) w.scale = get_float(ctx, g, "a number (the matrix is Scale * B)");
    if (Field g = o.get("InTraining")) w.in_training = get_bool(ctx, g);
    if (Field g = o.get("Indicator")) w.indicator = get_bool(ctx, g);
    if (Field g = o.get("PopularityExponent")) {
        w.popularity_exponent =
            get_float_in(ctx, g, 0, 2, false, "a number in [0, 2] (columns over degree^this)");
    }
    return w;
}

// `network`: the network-level values a layer inherits (activation parameters, sparseness).
ParsedLayer parse_layer(const Ctx& ctx, const Json::Value& v, size_t index, size_t count,
                        const NetworkConfig& network) {
    ParsedLayer out;
    out.path = "$.Layers[" + std::to_string(index) + "]";
    ObjectView o(ctx, v, out.path, kLayerKeys, kLayerNotImpl, "a layer object");
    LayerConfig& layer = out.config;

    // Kind first: the defaults and the allowed keys depend on it.
    layer.kind = index == 0           ? LayerKind::kInput
                 : index + 1 == count ? LayerKind::kOutput
                                      : LayerKind::kHidden;
    if (Field f = o.get("Kind")) {
        layer.kind = get_enum(ctx, f, "Kind", kLayerKinds, kLayerKindsNotImpl, kLayerKindList);
    }
    const std::string kind_name = to_string(layer.kind);
    auto not_allowed = [&](const Field& f, const std::string& key, const std::string& expected) {
        fail(ctx, f.path, key + " is not allowed on " + kind_name + " layers", expected);
    };

    if (Field f = o.get("Type")) {
        if (!f.value->isString()) wrong_type(ctx, f.path, *f.value, "the string FullyConnected");
        std::string t = f.value->asString();
        for (const std::string& n : kLayerTypesNotImpl) {
            if (iequals(t, n)) not_implemented(ctx, f.path, "Type " + n);
        }
        if (!iequals(t, kLayerTypes.front())) {
            fail(ctx, f.path, "unknown value " + quote(t), kLayerTypes.front());
        }
    }
    if (Field f = o.get("Name")) {
        layer.name = get_string(ctx, f, "a non-empty string (the layer name)", false);
        out.has_name = true;
    }
    if (Field f = o.get("N")) {
        parse_n(ctx, f, layer.kind, layer);
    } else {
        fail(ctx, o.child("N"), "missing required key N",
             layer.kind == LayerKind::kHidden
                 ? "the number of units, a positive integer"
                 : "the number of units, a positive integer or \"auto\"");
    }
    if (Field f = o.get("Sparse")) layer.sparse = get_bool(ctx, f);

    if (Field f = o.get("DataSet")) {
        if (layer.kind == LayerKind::kHidden) {
            not_allowed(f, "DataSet", "DataSet only on Input and Output layers");
        }
        layer.dataset = get_string(ctx, f, "a non-empty string (a dataset name)", false);
    } else if (layer.kind != LayerKind::kHidden) {
        fail(ctx, o.child("DataSet"), "missing required key DataSet on " + kind_name + " layer",
             "a non-empty string naming the dataset that feeds this layer");
    }

    if (Field f = o.get("Source")) {
        if (layer.kind == LayerKind::kInput) {
            not_allowed(f, "Source", "Source only on Hidden and Output layers");
        }
        parse_names(ctx, f, layer.sources, out.source_paths);
    }
    if (Field f = o.get("Skip")) {
        if (layer.kind == LayerKind::kInput) {
            not_allowed(f, "Skip", "Skip only on Hidden and Output layers");
        }
        parse_names(ctx, f, layer.skips, out.skip_paths);
    }
    if (Field f = o.get("SharedWeights")) {
        if (layer.kind == LayerKind::kInput) {
            not_allowed(f, "SharedWeights", "SharedWeights only on Hidden and Output layers");
        }
        parse_entries(ctx, f, "SharedWeights", parse_shared_entry, layer.shared_weights,
                      out.shared_paths);
    }

    if (Field f = o.get("FixedWeights")) {
        if (layer.kind == LayerKind::kInput) {
            not_allowed(f, "FixedWeights", "FixedWeights only on Hidden and Output layers");
        }
        parse_entries(ctx, f, "FixedWeights", parse_fixed_entry, layer.fixed_weights,
                      out.fixed_paths);
    }

    if (Field f = o.get("Activation")) {
        if (layer.kind == LayerKind::kInput) {
            not_allowed(f, "Activation", "Activation only on Hidden and Output layers");
        }
        layer.activation =
            get_enum(ctx, f, "Activation", kActivations, kActivationsNotImpl, kActivationList);
        out.activation_path = f.path;
    }
    layer.relu_slope = network.activation_defaults.relu_slope;
    layer.elu_alpha = network.activation_defaults.elu_alpha;
    layer.selu_lambda = network.activation_defaults.selu_lambda;
    for (const char* key : {"RELUSlope", "Slope", "ELUAlpha", "SELULambda"}) {
        if (Field f = o.get(key); f && layer.kind == LayerKind::kInput) {
            not_allowed(f, key, std::string(key) + " only on Hidden and Output layers");
        }
    }
    parse_activation_params(ctx, o, layer.relu_slope, layer.elu_alpha, layer.selu_lambda);
    if (Field f = o.get("pDropout")) {
        if (layer.kind == LayerKind::kOutput) {
            not_allowed(f, "pDropout",
                        "pDropout only on Input and Hidden layers (unlike DSSTNE, sparsenet does "
                        "not drop output units)");
        }
        layer.p_dropout = get_float_in(ctx, f, 0, 1, true, "a number in [0, 1)");
    }
    if (Field f = o.get("Normalize")) {
        if (layer.kind != LayerKind::kInput) {
            not_allowed(f, "Normalize", "Normalize only on Input layers");
        }
        layer.normalize_l2 = parse_normalize(ctx, f);
    }
    if (Field f = o.get("WeightInit")) {
        if (layer.kind == LayerKind::kInput) {
            not_allowed(f, "WeightInit", "WeightInit only on Hidden and Output layers");
        }
        layer.weight_init = parse_weight_init(ctx, f);
    }
    auto parse_norm = [&](const std::string& key, float& value) {
        Field f = o.get(key);
        if (!f) return;
        if (layer.kind == LayerKind::kInput) {
            not_allowed(f, key, key + " only on Hidden and Output layers");
        }
        value = get_float_in(ctx, f, 0, kInf, false, "a number >= 0 (0 = off)");
    };
    parse_norm("WeightNorm", layer.weight_norm);
    parse_norm("DeltaNorm", layer.delta_norm);
    layer.sparseness_penalty = network.sparseness_penalty;
    if (Field f = o.get("SparsenessPenalty")) {
        if (layer.kind != LayerKind::kHidden) {
            not_allowed(f, "SparsenessPenalty", "SparsenessPenalty only on Hidden layers");
        }
        if (!layer.sparse) {
            fail(ctx, f.path,
                 "SparsenessPenalty has no effect on a layer without \"Sparse\": true (the "
                 "penalty applies to sparse Hidden layers only)",
                 "\"Sparse\": true on this layer, or no SparsenessPenalty key");
        }
        layer.sparseness_penalty = parse_sparseness(ctx, f, network.sparseness_penalty);
    }
    return out;
}

// `name` (at `path`) must be a layer of the network.
void check_layer_name(const Ctx& ctx, const std::vector<ParsedLayer>& layers,
                      const std::map<std::string, size_t>& by_name, const std::string& name,
                      const std::string& path) {
    if (by_name.count(name) != 0) return;
    std::vector<std::string> names;
    std::string hint;
    for (const ParsedLayer& q : layers) {
        names.push_back(q.config.name);
        if (iequals(q.config.name, name)) {
            hint = " (layer names are case-sensitive; did you mean " + quote(q.config.name) + "?)";
        }
    }
    fail(ctx, path, "unknown layer " + quote(name) + hint,
         "the name of a layer in $.Layers: one of " + join(names));
}

// SharedWeights, after the sources are resolved: each entry's InputLayer is a Source of its
// layer (at most one entry per source), and SourceInputLayer -> SourceOutputLayer is an edge
// that owns its matrix (not itself shared, as in DSSTNE) and is not the sharing edge itself.
// Matrix shapes are checked when the network is built (N may be "auto" here).
void link_shared_weights(const Ctx& ctx, const std::vector<ParsedLayer>& layers) {
    std::map<std::string, size_t> by_name;
    for (size_t i = 0; i < layers.size(); ++i) by_name.emplace(layers[i].config.name, i);
    auto shares = [&](const LayerConfig& l, const std::string& source) {
        for (const SharedWeights& s : l.shared_weights) {
            if (s.input_layer == source) return true;
        }
        return false;
    };
    for (const ParsedLayer& p : layers) {
        const LayerConfig& l = p.config;
        for (size_t k = 0; k < l.shared_weights.size(); ++k) {
            const SharedWeights& s = l.shared_weights[k];
            const std::string& path = p.shared_paths[k];
            if (std::find(l.sources.begin(), l.sources.end(), s.input_layer) == l.sources.end()) {
                fail(ctx, path + ".InputLayer",
                     "layer " + quote(s.input_layer) + " is not a Source of layer " + quote(l.name),
                     "one of this layer's sources: " + join(l.sources));
            }
            for (size_t j = 0; j < k; ++j) {
                if (l.shared_weights[j].input_layer == s.input_layer) {
                    fail(ctx, path + ".InputLayer",
                         "the edge from " + quote(s.input_layer) + " is shared twice",
                         "at most one SharedWeights entry per source");
                }
            }
            check_layer_name(ctx, layers, by_name, s.source_input_layer,
                             path + ".SourceInputLayer");
            check_layer_name(ctx, layers, by_name, s.source_output_layer,
                             path + ".SourceOutputLayer");
            const LayerConfig& owner = layers[by_name.at(s.source_output_layer)].config;
            const std::string edge = quote(s.source_input_layer) + " -> " + quote(owner.name);
            if (std::find(owner.sources.begin(), owner.sources.end(), s.source_input_layer) ==
                owner.sources.end()) {
                fail(ctx, path,
                     "there is no weight matrix " + edge + ": " + quote(s.source_input_layer) +
                         " is not a Source of " + quote(owner.name),
                     "SourceInputLayer -> SourceOutputLayer naming an edge of the network");
            }
            if (owner.name == l.name && s.source_input_layer == s.input_layer) {
                fail(ctx, path, "the edge " + edge + " shares its own matrix",
                     "the SourceInputLayer -> SourceOutputLayer of another edge");
            }
            if (shares(owner, s.source_input_layer)) {
                fail(ctx, path,
                     "the edge " + edge +
                         " uses a shared matrix itself (chains of shared weights are not "
                         "allowed, as in DSSTNE)",
                     "the edge that owns the matrix");
            }
        }
    }
}

// FixedWeights, after the sources and SharedWeights are checked: each entry's Source is an
// Input layer among its layer's sources (entries of one source agree on InTraining), and the edge
// neither uses another edge's matrix nor lends its own (a fixed matrix is never trained, a shared
// one sums the gradients of its uses). Widths are checked when the network is built.
void link_fixed_weights(const Ctx& ctx, const std::vector<ParsedLayer>& layers) {
    std::map<std::string, size_t> by_name;
    for (size_t i = 0; i < layers.size(); ++i) by_name.emplace(layers[i].config.name, i);
    for (const ParsedLayer& p : layers) {
        const LayerConfig& l = p.config;
        for (size_t k = 0; k < l.fixed_weights.size(); ++k) {
            const FixedWeights& fw = l.fixed_weights[k];
            const std::string path = p.fixed_paths[k] + ".Source";
            if (std::find(l.sources.begin(), l.sources.end(), fw.source) == l.sources.end()) {
                fail(ctx, path,
                     "layer " + quote(fw.source) + " is not a Source of layer " + quote(l.name),
                     "one of this layer's sources: " + join(l.sources));
            }
            if (layers[by_name.at(fw.source)].config.kind != LayerKind::kInput) {
                fail(ctx, path, "layer " + quote(fw.source) + " is not an Input layer",
                     "an Input layer (the fit reads its training rows)");
            }
            // Several entries of one source are one edge whose matrix is the sum of their fits
            // (a blend of linear paths): they must agree on whether training sees it.
            for (size_t j = 0; j < k; ++j) {
                const FixedWeights& first = l.fixed_weights[j];
                if (first.source == fw.source && first.in_training != fw.in_training) {
                    fail(ctx, p.fixed_paths[k] + ".InTraining",
                         std::string("the edge from ") + quote(fw.source) + " has InTraining " +
                             (first.in_training ? "true" : "false") + " at " + p.fixed_paths[j],
                         "the same InTraining in every entry of one source (their fits are "
                         "summed into one matrix)");
                }
            }
            const std::string edge = quote(fw.source) + " -> " + quote(l.name);
            for (const SharedWeights& s : l.shared_weights) {
                if (s.input_layer == fw.source) {
                    fail(ctx, path, "the edge " + edge + " also has a SharedWeights entry",
                         "an edge with its own matrix (fixed or shared, not both)");
                }
            }
            for (const ParsedLayer& q : layers) {
                for (const SharedWeights& s : q.config.shared_weights) {
                    if (s.source_input_layer == fw.source && s.source_output_layer == l.name) {
                        fail(ctx, path,
                             "the edge " + edge + " lends its matrix to layer " +
                                 quote(q.config.name) + " (SharedWeights)",
                             "a fixed edge whose matrix no other edge uses");
                    }
                }
            }
        }
    }
}

// Names, default sources, source existence and acyclicity.
void link_layers(const Ctx& ctx, std::vector<ParsedLayer>& layers) {
    bool has_input = false, has_output = false;
    for (const ParsedLayer& p : layers) {
        has_input = has_input || p.config.kind == LayerKind::kInput;
        has_output = has_output || p.config.kind == LayerKind::kOutput;
    }
    if (!has_input) {
        fail(ctx, "$.Layers", "no Input layer",
             "at least one layer with Kind Input (the first layer is Input by default)");
    }
    if (!has_output) {
        fail(ctx, "$.Layers", "no Output layer",
             "at least one layer with Kind Output (the last layer is Output by default)");
    }

    std::map<std::string, size_t> by_name;
    for (size_t i = 0; i < layers.size(); ++i) {
        LayerConfig& l = layers[i].config;
        if (!layers[i].has_name) l.name = std::string(to_string(l.kind)) + std::to_string(i);
        auto [it, inserted] = by_name.emplace(l.name, i);
        if (!inserted) {
            fail(ctx, layers[i].path + ".Name",
                 std::string("duplicate layer name ") + quote(l.name) +
                     (layers[i].has_name ? "" : " (the default name of this layer)") +
                     ", already used by " + layers[it->second].path,
                 "unique layer names");
        }
    }

    for (size_t i = 0; i < layers.size(); ++i) {
        ParsedLayer& p = layers[i];
        LayerConfig& l = p.config;
        if (l.kind == LayerKind::kInput) continue;
        if (l.sources.empty()) {
            if (i == 0) {
                fail(ctx, p.path,
                     std::string(to_string(l.kind)) + " layer has no Source and no previous layer",
                     "a Source key naming the layer(s) that feed this layer");
            }
            l.sources.push_back(layers[i - 1].config.name);
            p.source_paths.push_back(p.path);
            p.default_source = true;
        }
        // Source and Skip: existing layers, each listed once.
        auto check_names = [&](const std::vector<std::string>& list,
                               const std::vector<std::string>& paths, const char* what) {
            for (size_t k = 0; k < list.size(); ++k) {
                const std::string& s = list[k];
                for (size_t j = 0; j < k; ++j) {
                    if (list[j] == s) {
                        fail(ctx, paths[k], "layer " + quote(s) + " is listed twice",
                             std::string("each ") + what + " at most once");
                    }
                }
                check_layer_name(ctx, layers, by_name, s, paths[k]);
            }
        };
        check_names(l.sources, p.source_paths, "source");
        check_names(l.skips, p.skip_paths, "skip");
    }

    // Acyclicity: depth-first search over the Source and Skip edges (a skip's activations are
    // needed before the layer, like a source's).
    enum Mark { kWhite, kGrey, kBlack };
    std::vector<Mark> mark(layers.size(), kWhite);
    std::vector<size_t> stack;
    std::function<void(size_t)> visit = [&](size_t i) {
        mark[i] = kGrey;
        stack.push_back(i);
        const LayerConfig& l = layers[i].config;
        const size_t edges = l.sources.size() + l.skips.size();
        for (size_t k = 0; k < edges; ++k) {
            const bool skip = k >= l.sources.size();
            const size_t e = skip ? k - l.sources.size() : k;
            size_t j = by_name.at(skip ? l.skips[e] : l.sources[e]);
            if (mark[j] == kGrey) {
                std::vector<std::string> cycle;
                auto from = std::find(stack.begin(), stack.end(), j);
                for (auto it = from; it != stack.end(); ++it) {
                    cycle.push_back(quote(layers[*it].config.name));
                }
                cycle.push_back(quote(layers[j].config.name));
                fail(ctx, skip ? layers[i].skip_paths[e] : layers[i].source_paths[e],
                     "the layer graph has a cycle: " + join(cycle, " <- ") +
                         " (A <- B: B is a Source or Skip of A" +
                         (!skip && layers[i].default_source
                              ? "; this layer has no Source key, so its Source is the "
                                "previous layer)"
                              : ")"),
                     "an acyclic graph of layers");
            }
            if (mark[j] == kWhite) visit(j);
        }
        stack.pop_back();
        mark[i] = kBlack;
    };
    for (size_t i = 0; i < layers.size(); ++i) {
        if (mark[i] == kWhite) visit(i);
    }
}

// Loss and output activation combinations DSSTNE refuses.
void check_loss_activation(const Ctx& ctx, const NetworkConfig& cfg,
                           const std::vector<ParsedLayer>& layers) {
    for (const ParsedLayer& p : layers) {
        const LayerConfig& l = p.config;
        if (l.kind != LayerKind::kOutput) continue;
        if (cfg.error_function == ErrorFunction::kDataScaledMarginalCrossEntropy &&
            l.activation == Activation::kSoftMax) {
            fail(ctx, p.activation_path,
                 "SoftMax cannot be used with ErrorFunction DataScaledMarginalCrossEntropy (as in "
                 "DSSTNE)",
                 "an element-wise output activation such as Sigmoid, or another ErrorFunction");
        }
        if ((cfg.delta_boost_one != 1.0f || cfg.delta_boost_zero != 1.0f) &&
            l.activation == Activation::kSoftMax) {
            fail(ctx, p.activation_path,
                 "SoftMax cannot be used with DeltaBoost (a SoftMax delta couples every unit of "
                 "the row, so per-unit boosts have no clear meaning)",
                 "an element-wise output activation such as Sigmoid, or no DeltaBoost");
        }
    }
}

Json::Value parse_document(const std::string& text, const std::string& source) {
    Json::CharReaderBuilder builder;
    builder["collectComments"] = false;
    builder["rejectDupKeys"] = true;
    builder["failIfExtra"] = true;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    Json::Value root;
    std::string errors;
    if (!reader->parse(text.data(), text.data() + text.size(), &root, &errors)) {
        // JsonCpp's text is "* Line L, Column C\n  message\n..."; keep it on one line.
        std::string flat;
        bool space = false;
        for (char c : errors) {
            if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
                space = !flat.empty();
            } else {
                if (space) flat += ' ';
                space = false;
                flat += c;
            }
        }
        throw Error(ErrorCategory::kConfig,
                    source + ": $: malformed JSON: " + flat + "; expected a valid JSON document");
    }
    return root;
}

}  // namespace

NetworkConfig NetworkConfig::from_json(const std::string& json_text, const std::string& source) {
    const Ctx ctx{source};
    const Json::Value root = parse_document(json_text, source);
    ObjectView top(ctx, root, "$", kTopKeys, kTopNotImpl, "a JSON object (the network definition)");
    NetworkConfig cfg;

    if (Field f = top.get("Version")) {
        const char* expected = "a number >= 0.7";
        double v = get_number(ctx, f, expected);
        if (v < 0.7) fail(ctx, f.path, "version " + format_number(v) + " is too old", expected);
        cfg.version = v;
    }
    if (Field f = top.get("Name")) cfg.name = get_string(ctx, f, "a string (the network name)");
    if (Field f = top.get("Kind")) {
        cfg.kind = get_enum(ctx, f, "Kind", kNetworkKinds, kNone, kNetworkKindList);
    }
    if (Field f = top.get("ErrorFunction")) {
        cfg.error_function =
            get_enum(ctx, f, "ErrorFunction", kErrorFunctions, kNone, kErrorFunctionList);
    }
    if (Field f = get_alias(ctx, top, kSmceObjectKeys)) cfg.smce = parse_smce(ctx, f);
    if (Field f = top.get("Denoising")) {
        ObjectView o(ctx, *f.value, f.path, kDenoisingKeys, kNone, "an object with key p");
        if (Field p = o.get("p")) {
            cfg.denoising_p = get_float_in(ctx, p, 0, 1, true, "a number in [0, 1)");
        }
    }
    if (Field f = top.get("SparsenessPenalty")) {
        cfg.sparseness_penalty = parse_sparseness(ctx, f, SparsenessPenalty{});
    }
    if (Field f = top.get("DeltaBoost")) {
        ObjectView o(ctx, *f.value, f.path, kDeltaBoostKeys, kNone,
                     "an object with keys one, zero");
        const char* what = "a number >= 0";
        if (Field g = o.get("one")) cfg.delta_boost_one = get_float_in(ctx, g, 0, kInf, true, what);
        if (Field g = o.get("zero"))
            cfg.delta_boost_zero = get_float_in(ctx, g, 0, kInf, true, what);
    }
    parse_activation_params(ctx, top, cfg.activation_defaults.relu_slope,
                            cfg.activation_defaults.elu_alpha, cfg.activation_defaults.selu_lambda);
    if (Field f = top.get("ShuffleIndices")) cfg.shuffle_indices = get_bool(ctx, f);
    if (Field f = top.get("Decay")) {
        cfg.decay = get_float_in(ctx, f, 0, kInf, false, "a number >= 0 (the learning-rate decay)");
    }
    if (Field f = top.get("Training")) cfg.training = parse_training(ctx, f);

    Field layers = top.get("Layers");
    const char* layers_expected = "a non-empty array of layer objects";
    if (!layers) fail(ctx, layers.path, "missing required key Layers", layers_expected);
    if (!layers.value->isArray()) wrong_type(ctx, layers.path, *layers.value, layers_expected);
    if (layers.value->empty()) fail(ctx, layers.path, "empty array", layers_expected);

    std::vector<ParsedLayer> parsed;
    const size_t count = layers.value->size();
    for (size_t i = 0; i < count; ++i) {
        parsed.push_back(
            parse_layer(ctx, (*layers.value)[static_cast<Json::ArrayIndex>(i)], i, count, cfg));
    }
    link_layers(ctx, parsed);
    link_shared_weights(ctx, parsed);
    link_fixed_weights(ctx, parsed);
    check_loss_activation(ctx, cfg, parsed);
    for (ParsedLayer& p : parsed) cfg.layers.push_back(std::move(p.config));
    return cfg;
}

NetworkConfig NetworkConfig::from_file(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::file_status st = fs::status(path, ec);
    if (!fs::exists(st)) {
        throw Error(ErrorCategory::kIo,
                    path +
                        ": cannot open network file: no such file; expected a readable JSON "
                        "network definition");
    }
    if (fs::is_directory(st)) {
        throw Error(ErrorCategory::kIo, path +
                                            ": cannot read network file: it is a directory; "
                                            "expected a readable JSON network definition");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw Error(ErrorCategory::kIo, path +
                                            ": cannot open network file: " + std::strerror(errno) +
                                            "; expected a readable JSON network definition");
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
        throw Error(ErrorCategory::kIo,
                    path + ": error while reading network file; expected a readable JSON file");
    }
    return from_json(text.str(), path);
}

std::vector<ConfigKeySet> config_key_sets() {
    return {{"$", kTopKeys, kTopNotImpl},
            {"$.ScaledMarginalCrossEntropy", kSmceKeys, kNone},
            {"$.DataScaledMarginalCrossEntropy", kSmceKeys, kNone},
            {"$.Denoising", kDenoisingKeys, kNone},
            {"$.DeltaBoost", kDeltaBoostKeys, kNone},
            {"$.SparsenessPenalty", kSparsenessKeys, kNone},
            {"$.Layers[]", kLayerKeys, kLayerNotImpl},
            {"$.Layers[].SharedWeights", kSharedWeightsKeys, kNone},
            {"$.Layers[].FixedWeights", kFixedWeightsKeys, kNone},
            {"$.Layers[].WeightInit", kWeightInitKeys, kNone},
            {"$.Layers[].Normalize", kNormalizeKeys, kNone},
            {"$.Layers[].SparsenessPenalty", kSparsenessKeys, kNone},
            {"$.Training", kTrainingKeys, kNone}};
}

std::vector<ConfigValueSet> config_value_sets() {
    return {{"$.Kind", names_of(kNetworkKinds), kNone},
            {"$.ErrorFunction", names_of(kErrorFunctions), kNone},
            {"$.Layers[].Kind", names_of(kLayerKinds), kLayerKindsNotImpl},
            {"$.Layers[].Type", kLayerTypes, kLayerTypesNotImpl},
            {"$.Layers[].Activation", names_of(kActivations), kActivationsNotImpl},
            {"$.Layers[].WeightInit.Scheme", names_of(kSchemes), kNone},
            {"$.Layers[].Normalize.Norm", kNorms, kNone},
            {"$.Layers[].FixedWeights.Fit", names_of(kLinearFits), kNone},
            {"$.Training.Optimizer", names_of(kOptimizers), kNone},
            {"$.Training.SparseUpdates", names_of(kSparseUpdates), kNone},
            {"$.Training.Precision", names_of(kPrecisions), kNone}};
}

// The graph's rules (names, sources, skips, ties, cycles) live in from_json alone; a config from
// code goes through them as text, so they are written once, with their JSON paths.
void NetworkConfig::validate() const {
    (void)from_json(to_json(), "<config built in code>");
}

const LayerConfig* NetworkConfig::find_layer(const std::string& name) const {
    for (const LayerConfig& l : layers) {
        if (l.name == name) return &l;
    }
    return nullptr;
}

}  // namespace sparsenet
