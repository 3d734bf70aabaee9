// The activation, loss, initialiser and regulariser part of DSSTNE's network language: activation
// parameters (network defaults and layer overrides, aliases), SparsenessPenalty, WeightNorm,
// DeltaNorm, the DataScaledMarginalCrossEntropy object, the loss / activation combinations that
// are refused, and the canonical JSON of all of them.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

#define EXPECT_CONTAINS(haystack, needle)                            \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
        << "  message: " << (haystack) << "\n  does not contain: " << (needle)

// Input -> Hidden -> Output; `top` ends with a comma, the layer extras start with one.
std::string net(const std::string& top = "", const std::string& in = "",
                const std::string& hid = "", const std::string& out = "") {
    return "{ " + top + R"( "Layers": [
        { "N": 10, "DataSet": "x")" +
           in + R"( },
        { "N": 4)" +
           hid +
           R"( },
        { "N": 10, "DataSet": "y")" +
           out + " } ] }";
}

std::string config_error(const std::string& json) {
    try {
        NetworkConfig::from_json(json, "net.json");
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kConfig) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error for " << json;
    return "";
}

void expect_round_trip(const NetworkConfig& c) {
    const std::string json = c.to_json();
    SCOPED_TRACE(json);
    const NetworkConfig back = NetworkConfig::from_json(json, "<to_json>");
    EXPECT_TRUE(back == c);
    EXPECT_EQ(back.to_json(), json);
}

// ---------------------------------------------------------------- activation parameters

TEST(ConfigActivationParams, DsstneDefaults) {
    const NetworkConfig c = NetworkConfig::from_json(net());
    EXPECT_EQ(c.activation_defaults.relu_slope, 1.0f);
    EXPECT_EQ(c.activation_defaults.elu_alpha, 1.0f);
    EXPECT_EQ(c.activation_defaults.selu_lambda, 1.050701f);
    for (size_t i : {1, 2}) {
        EXPECT_EQ(c.layers[i].relu_slope, 1.0f);
        EXPECT_EQ(c.layers[i].elu_alpha, 1.0f);
        EXPECT_EQ(c.layers[i].selu_lambda, 1.050701f);
    }
}

TEST(ConfigActivationParams, NetworkValuesAreTheLayersDefaults) {
    const NetworkConfig c = NetworkConfig::from_json(net(
        R"("RELUSlope": 0.1, "ELUAlpha": 1.5, "SELULambda": 1.2,)", "",
        R"(, "Activation": "LRelu", "Slope": 0.3)", R"(, "Activation": "Selu", "ELUAlpha": 0.5)"));
    EXPECT_EQ(c.activation_defaults.relu_slope, 0.1f);
    EXPECT_EQ(c.activation_defaults.elu_alpha, 1.5f);
    EXPECT_EQ(c.activation_defaults.selu_lambda, 1.2f);
    EXPECT_EQ(c.layers[1].activation, Activation::kLeakyRectifiedLinear);
    EXPECT_EQ(c.layers[1].relu_slope, 0.3f);  // the layer's own
    EXPECT_EQ(c.layers[1].elu_alpha, 1.5f);   // the network's
    EXPECT_EQ(c.layers[2].activation, Activation::kScaledExponentialLinear);
    EXPECT_EQ(c.layers[2].relu_slope, 0.1f);
    EXPECT_EQ(c.layers[2].elu_alpha, 0.5f);
    EXPECT_EQ(c.layers[2].selu_lambda, 1.2f);
    expect_round_trip(c);
}

TEST(ConfigActivationParams, SlopeIsAnAliasOfRELUSlope) {
    EXPECT_EQ(NetworkConfig::from_json(net(R"("Slope": 0.25,)")).activation_defaults.relu_slope,
              0.25f);
    EXPECT_EQ(NetworkConfig::from_json(net("", "", R"(, "reluslope": 0.5)")).layers[1].relu_slope,
              0.5f);
    const std::string m = config_error(net(R"("RELUSlope": 0.1, "Slope": 0.2,)"));
    EXPECT_CONTAINS(m,
                    "net.json: $: keys \"RELUSlope\" and \"Slope\" are two spellings of one key");
    EXPECT_CONTAINS(m, "expected at most one of RELUSlope, Slope");
    EXPECT_CONTAINS(config_error(net("", "", R"(, "slope": 0.1, "RELUSLOPE": 0.2)")),
                    "$.Layers[1]: keys \"RELUSLOPE\" and \"slope\"");
}

TEST(ConfigActivationParams, RangesAndPlacement) {
    EXPECT_CONTAINS(config_error(net(R"("RELUSlope": -0.1,)")),
                    "$.RELUSlope: value -0.1 is out of range; expected a number >= 0");
    EXPECT_CONTAINS(config_error(net("", "", R"(, "ELUAlpha": -1)")),
                    "$.Layers[1].ELUAlpha: value -1 is out of range");
    EXPECT_CONTAINS(config_error(net(R"("SELULambda": 0,)")),
                    "$.SELULambda: value 0 is out of range; expected a number > 0");
    EXPECT_CONTAINS(config_error(net("", "", "", R"(, "SELULambda": "big")")),
                    "$.Layers[2].SELULambda: wrong type: found string \"big\"");
    EXPECT_CONTAINS(config_error(net("", R"(, "Slope": 0.1)")),
                    "$.Layers[0].Slope: Slope is not allowed on Input layers");
    EXPECT_CONTAINS(config_error(net("", R"(, "ELUAlpha": 0.1)")),
                    "$.Layers[0].ELUAlpha: ELUAlpha is not allowed on Input layers");
}

// ---------------------------------------------------------------- SparsenessPenalty

TEST(ConfigSparsenessPenalty, NetworkDefaultAndLayerOverrides) {
    const NetworkConfig off = NetworkConfig::from_json(net("", "", R"(, "Sparse": true)"));
    EXPECT_EQ(off.sparseness_penalty, SparsenessPenalty{});
    EXPECT_FALSE(off.layers[1].has_sparseness_penalty());  // beta 0: off

    const NetworkConfig c = NetworkConfig::from_json(R"({
        "SparsenessPenalty": { "p": 0.05, "beta": 2 },
        "Layers": [ { "N": 10, "DataSet": "x", "Sparse": true },
                    { "N": 4, "Sparse": true },
                    { "N": 4, "Sparse": true, "SparsenessPenalty": { "beta": 0.5 } },
                    { "N": 4, "Sparse": true, "SparsenessPenalty": { "p": 0.2, "beta": 0 } },
                    { "N": 4 },
                    { "N": 10, "DataSet": "y", "Sparse": true } ] })");
    EXPECT_EQ(c.sparseness_penalty.p, 0.05f);
    EXPECT_EQ(c.sparseness_penalty.beta, 2.0f);
    EXPECT_FALSE(c.layers[0].has_sparseness_penalty());  // Input
    EXPECT_TRUE(c.layers[1].has_sparseness_penalty());   // the network's values
    EXPECT_EQ(c.layers[1].sparseness_penalty.p, 0.05f);
    EXPECT_EQ(c.layers[1].sparseness_penalty.beta, 2.0f);
    EXPECT_TRUE(c.layers[2].has_sparseness_penalty());  // beta overridden, p inherited
    EXPECT_EQ(c.layers[2].sparseness_penalty.p, 0.05f);
    EXPECT_EQ(c.layers[2].sparseness_penalty.beta, 0.5f);
    EXPECT_FALSE(c.layers[3].has_sparseness_penalty());  // turned off for this layer
    EXPECT_EQ(c.layers[3].sparseness_penalty.p, 0.2f);
    EXPECT_FALSE(c.layers[4].has_sparseness_penalty());  // not "Sparse"
    EXPECT_FALSE(c.layers[5].has_sparseness_penalty());  // Output
    expect_round_trip(c);
}

TEST(ConfigSparsenessPenalty, RangesAndPlacement) {
    EXPECT_CONTAINS(
        config_error(net(R"("SparsenessPenalty": { "p": 1.5 },)")),
        "$.SparsenessPenalty.p: value 1.5 is out of range; expected a number in [0, 1]");
    EXPECT_CONTAINS(config_error(net(R"("SparsenessPenalty": { "beta": -1 },)")),
                    "$.SparsenessPenalty.beta: value -1 is out of range; expected a number >= 0");
    EXPECT_CONTAINS(config_error(net(R"("SparsenessPenalty": { "rho": 0.1 },)")),
                    "$.SparsenessPenalty.rho: unknown key \"rho\"; expected one of the keys valid "
                    "here: p, beta");
    EXPECT_CONTAINS(config_error(net(R"("SparsenessPenalty": 0.5,)")),
                    "$.SparsenessPenalty: wrong type: found number 0.5");
    const std::string not_sparse =
        config_error(net("", "", R"(, "SparsenessPenalty": { "p": 0.1, "beta": 1 })"));
    EXPECT_CONTAINS(not_sparse,
                    "$.Layers[1].SparsenessPenalty: SparsenessPenalty has no effect on a layer "
                    "without \"Sparse\": true");
    EXPECT_CONTAINS(config_error(net("", "", "", R"(, "Sparse": true, "SparsenessPenalty": {})")),
                    "$.Layers[2].SparsenessPenalty: SparsenessPenalty is not allowed on Output "
                    "layers");
}

// ---------------------------------------------------------------- WeightNorm and DeltaNorm

TEST(ConfigNorms, ParsedOnHiddenAndOutputLayers) {
    const NetworkConfig c = NetworkConfig::from_json(
        net("", "", R"(, "WeightNorm": 3, "DeltaNorm": 0.5)", R"(, "deltanorm": 2)"));
    EXPECT_EQ(c.layers[1].weight_norm, 3.0f);
    EXPECT_EQ(c.layers[1].delta_norm, 0.5f);
    EXPECT_EQ(c.layers[2].weight_norm, 0.0f);
    EXPECT_EQ(c.layers[2].delta_norm, 2.0f);
    expect_round_trip(c);
    EXPECT_CONTAINS(config_error(net("", "", R"(, "WeightNorm": -1)")),
                    "$.Layers[1].WeightNorm: value -1 is out of range; expected a number >= 0 "
                    "(0 = off)");
    EXPECT_CONTAINS(config_error(net("", R"(, "DeltaNorm": 1)")),
                    "$.Layers[0].DeltaNorm: DeltaNorm is not allowed on Input layers");
}

// ---------------------------------------------------------------- Normalize (extension)

TEST(ConfigNormalize, ParsedOnInputLayersOnly) {
    const NetworkConfig c =
        NetworkConfig::from_json(net("", R"(, "Normalize": { "Norm": "l2", "Scale": 4 })"));
    EXPECT_EQ(c.layers[0].normalize_l2, 4.0f);
    EXPECT_EQ(c.layers[1].normalize_l2, 0.0f);
    expect_round_trip(c);
    EXPECT_CONTAINS(c.to_json(), "\"Normalize\": { \"Norm\": \"L2\", \"Scale\": 4 }");
    EXPECT_EQ(NetworkConfig::from_json(net("", R"(, "Normalize": { "Norm": "L2" })"))
                  .layers[0]
                  .normalize_l2,
              1.0f);
    // Off: the key is not written, so configs without it keep their canonical JSON.
    EXPECT_EQ(NetworkConfig::from_json(net()).to_json().find("Normalize"), std::string::npos);

    EXPECT_CONTAINS(config_error(net("", "", R"(, "Normalize": { "Norm": "L2" })")),
                    "$.Layers[1].Normalize: Normalize is not allowed on Hidden layers");
    EXPECT_CONTAINS(config_error(net("", "", "", R"(, "Normalize": { "Norm": "L2" })")),
                    "$.Layers[2].Normalize: Normalize is not allowed on Output layers");
    EXPECT_CONTAINS(config_error(net("", R"(, "Normalize": { "Norm": "L1" })")),
                    "$.Layers[0].Normalize.Norm: unknown value \"L1\"; expected one of L2");
    EXPECT_CONTAINS(config_error(net("", R"(, "Normalize": { "Scale": 2 })")),
                    "$.Layers[0].Normalize: Normalize has no Norm; expected \"Norm\": \"L2\"");
    EXPECT_CONTAINS(config_error(net("", R"(, "Normalize": { "Norm": "L2", "Scale": 0 })")),
                    "$.Layers[0].Normalize.Scale: value 0 is out of range; expected a number > 0");
    EXPECT_CONTAINS(config_error(net("", R"(, "Normalize": { "Norm": "L2", "p": 2 })")),
                    "$.Layers[0].Normalize.p: unknown key \"p\"; expected one of the keys valid "
                    "here: Norm, Scale");
    EXPECT_CONTAINS(config_error(net("", R"(, "Normalize": "L2")")),
                    "$.Layers[0].Normalize: wrong type: found string");
}

// ---------------------------------------------------------------- losses

TEST(ConfigLosses, DataScaledMarginalCrossEntropyObjectSetsTheMargins) {
    const NetworkConfig c =
        NetworkConfig::from_json(net(R"("ErrorFunction": "DataScaledMarginalCrossEntropy",
               "DataScaledMarginalCrossEntropy": { "oneTarget": 0.8, "oneScale": 30 },)"));
    EXPECT_EQ(c.error_function, ErrorFunction::kDataScaledMarginalCrossEntropy);
    EXPECT_EQ(c.smce.one_target, 0.8f);
    EXPECT_EQ(c.smce.zero_target, 0.1f);
    EXPECT_EQ(c.smce.one_scale, 30.0f);
    expect_round_trip(c);
    const std::string both = config_error(net(R"("ScaledMarginalCrossEntropy": {},
        "DataScaledMarginalCrossEntropy": {},)"));
    EXPECT_CONTAINS(both,
                    "$: keys \"ScaledMarginalCrossEntropy\" and \"DataScaledMarginalCrossEntropy\" "
                    "are two spellings of one key");
}

TEST(ConfigLosses, DataScaledMarginalCrossEntropyRefusesSoftMaxOutputs) {
    const std::string m = config_error(net(R"("ErrorFunction": "DataScaledMarginalCrossEntropy",)",
                                           "", "", R"(, "Activation": "SoftMax")"));
    EXPECT_CONTAINS(m,
                    "net.json: $.Layers[2].Activation: SoftMax cannot be used with ErrorFunction "
                    "DataScaledMarginalCrossEntropy");
    // Hidden layers and every other loss may use any activation the parser knows.
    for (const char* loss :
         {"L1", "L2", "L2Hinge", "Hinge", "CrossEntropy", "ScaledMarginalCrossEntropy"}) {
        SCOPED_TRACE(loss);
        const NetworkConfig c =
            NetworkConfig::from_json(net(std::string(R"("ErrorFunction": ")") + loss + "\",", "",
                                         "", R"(, "Activation": "SoftMax")"));
        EXPECT_EQ(c.layers[2].activation, Activation::kSoftMax);
    }
}

// ---------------------------------------------------------------- canonical JSON

TEST(ConfigLanguageJson, EveryNewKeyIsWrittenAndRoundTrips) {
    const NetworkConfig c = NetworkConfig::from_json(R"({
        "ErrorFunction": "L2Hinge", "SparsenessPenalty": { "p": 0.1, "beta": 3 },
        "RELUSlope": 0.01, "ELUAlpha": 1.6732632, "SELULambda": 1.0507009,
        "Layers": [
          { "Name": "in", "N": 10, "DataSet": "x", "Sparse": true },
          { "Name": "lrelu", "N": 8, "Activation": "LRelu", "Sparse": true,
            "WeightInit": { "Scheme": "CaffeXavier", "Scale": 2 } },
          { "Name": "elu", "N": 8, "Activation": "Elu", "ELUAlpha": 0.5, "pDropout": 0.1,
            "WeightInit": { "Scheme": "UnitBall", "Scale": 0.5 }, "WeightNorm": 2 },
          { "Name": "selu", "N": 8, "Activation": "Selu", "DeltaNorm": 4,
            "WeightInit": { "Scheme": "SELU" } },
          { "Name": "sp", "N": 8, "Activation": "SoftPlus", "Sparse": true,
            "SparsenessPenalty": { "p": 0.3 } },
          { "Name": "out", "N": 10, "DataSet": "y", "Activation": "SoftSign" } ] })");
    const std::string j = c.to_json();
    for (const char* key :
         {"\"ErrorFunction\": \"L2Hinge\"", "\"SparsenessPenalty\": { \"p\": 0.1, \"beta\": 3 }",
          "\"RELUSlope\": 0.01", "\"ELUAlpha\": 1.6732632", "\"SELULambda\": 1.0507009",
          "\"Activation\": \"LeakyRectifiedLinear\", \"RELUSlope\": 0.01",
          "\"Scheme\": \"CaffeXavier\"", "\"Activation\": \"ExponentialLinear\", \"ELUAlpha\": 0.5",
          "\"Scheme\": \"UnitBall\"", "\"WeightNorm\": 2, \"DeltaNorm\": 0",
          "\"Activation\": \"ScaledExponentialLinear\", \"ELUAlpha\": 1.6732632, "
          "\"SELULambda\": 1.0507009",
          "\"Scheme\": \"SELU\"", "\"WeightNorm\": 0, \"DeltaNorm\": 4",
          "\"Activation\": \"SoftPlus\"", "\"SparsenessPenalty\": { \"p\": 0.3, \"beta\": 3 }",
          "\"Activation\": \"SoftSign\""}) {
        EXPECT_CONTAINS(j, key);
    }
    expect_round_trip(c);
}

// ---------------------------------------------------------------- exported key lists

TEST(ConfigKeySets, ListTheObjectsAndNoKeyTwice) {
    const std::vector<ConfigKeySet> sets = config_key_sets();
    std::vector<std::string> objects;
    for (const ConfigKeySet& s : sets) {
        objects.push_back(s.object);
        std::vector<std::string> all = s.accepted;
        all.insert(all.end(), s.not_implemented.begin(), s.not_implemented.end());
        std::sort(all.begin(), all.end());
        EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << s.object;
    }
    EXPECT_EQ(objects,
              (std::vector<std::string>{
                  "$", "$.ScaledMarginalCrossEntropy", "$.DataScaledMarginalCrossEntropy",
                  "$.Denoising", "$.DeltaBoost", "$.SparsenessPenalty", "$.Layers[]",
                  "$.Layers[].SharedWeights", "$.Layers[].FixedWeights", "$.Layers[].WeightInit",
                  "$.Layers[].Normalize", "$.Layers[].SparsenessPenalty", "$.Training"}));
    for (const ConfigValueSet& v : config_value_sets()) EXPECT_FALSE(v.accepted.empty()) << v.key;
}

}  // namespace
}  // namespace sparsenet
