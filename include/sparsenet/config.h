// NetworkConfig: a validated network definition in DSSTNE's JSON network language.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparsenet {

enum class LayerKind { kInput, kHidden, kOutput };
enum class Activation { kSigmoid, kTanh, kRectifiedLinear, kLinear, kSoftMax };
enum class ErrorFunction { kL2, kCrossEntropy, kScaledMarginalCrossEntropy };
enum class WeightInitScheme { kXavier, kGaussian, kUniform, kConstant };

const char* to_string(LayerKind v);
const char* to_string(Activation v);
const char* to_string(ErrorFunction v);
const char* to_string(WeightInitScheme v);

struct WeightInit {
    WeightInitScheme scheme = WeightInitScheme::kXavier;
    float scale = 1.0f;
    float bias = 0.0f;
};

struct LayerConfig {
    std::string name;
    LayerKind kind = LayerKind::kHidden;
    uint32_t n = 0;       // units; 0 when n_auto until resolved from the dataset
    bool n_auto = false;  // "N": "auto" (Input/Output only)
    bool sparse = false;
    std::string dataset;               // Input and Output layers
    std::vector<std::string> sources;  // non-input; default: the previous layer
    Activation activation = Activation::kSigmoid;
    float p_dropout = 0.0f;
    WeightInit weight_init;
};

// SMCE margins (DSSTNE defaults).
struct SmceParams {
    float one_target = 0.9f;
    float zero_target = 0.1f;
    float one_scale = 1.0f;
    float zero_scale = 1.0f;
};

struct NetworkConfig {
    double version = 0.9;
    std::string name;
    std::string kind = "FeedForward";  // FeedForward | AutoEncoder (a label only)
    ErrorFunction error_function = ErrorFunction::kCrossEntropy;
    SmceParams smce;
    float denoising_p = 0.0f;
    bool shuffle_indices = true;
    std::vector<LayerConfig> layers;

    // Parse and validate. `source` names the file (or "<string>") in error messages.
    // Throws Error(kConfig) with the JSON path, or Error(kNotImplemented) naming the key.
    static NetworkConfig from_json(const std::string& json_text,
                                   const std::string& source = "<string>");
    static NetworkConfig from_file(const std::string& path);

    // Canonical JSON (DSSTNE spelling, every key explicit); from_json(to_json()) == *this.
    std::string to_json() const;

    const LayerConfig* find_layer(const std::string& name) const;  // nullptr if absent
};

bool operator==(const WeightInit& a, const WeightInit& b);
bool operator==(const LayerConfig& a, const LayerConfig& b);
bool operator==(const SmceParams& a, const SmceParams& b);
bool operator==(const NetworkConfig& a, const NetworkConfig& b);

}  // namespace sparsenet
