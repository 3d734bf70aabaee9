// NetworkConfig: parsing, validation, error messages and canonical JSON of DSSTNE's network
// language (see docs/config-reference.md).

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

#define EXPECT_CONTAINS(haystack, needle)                            \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
        << "  message: " << (haystack) << "\n  does not contain: " << (needle)

struct Caught {
    bool thrown = false;
    ErrorCategory category = ErrorCategory::kInternal;
    std::string message;
};

Caught parse_error(const std::string& json, const std::string& source = "net.json") {
    Caught c;
    try {
        NetworkConfig::from_json(json, source);
    } catch (const Error& e) {
        c.thrown = true;
        c.category = e.category();
        c.message = e.what();
    }
    return c;
}

// Expects a kConfig error whose message contains every string of `parts`.
void expect_config_error(const std::string& json, const std::vector<std::string>& parts) {
    SCOPED_TRACE(json);
    Caught c = parse_error(json);
    ASSERT_TRUE(c.thrown) << "no error thrown";
    EXPECT_EQ(c.category, ErrorCategory::kConfig) << c.message;
    EXPECT_CONTAINS(c.message, "net.json: ");
    EXPECT_CONTAINS(c.message, "; expected ");
    for (const std::string& p : parts) EXPECT_CONTAINS(c.message, p);
}

// Expects kNotImplemented with "<path>: not implemented yet: <what>".
void expect_not_implemented(const std::string& json, const std::string& path,
                            const std::string& what) {
    SCOPED_TRACE(json);
    Caught c = parse_error(json);
    ASSERT_TRUE(c.thrown) << "no error thrown";
    EXPECT_EQ(c.category, ErrorCategory::kNotImplemented) << c.message;
    EXPECT_CONTAINS(c.message, "net.json: " + path + ": not implemented yet: " + what);
}

// One layer object: the default keys of `defaults` that `extra` does not set itself, then `extra`
// (which starts with a comma when non-empty).
std::string layer(const std::vector<std::pair<std::string, std::string>>& defaults,
                  const std::string& extra) {
    std::string body;
    for (const auto& [key, value] : defaults) {
        if (extra.find("\"" + key + "\"") != std::string::npos) continue;
        body += (body.empty() ? "" : ", ") + ("\"" + key + "\": " + value);
    }
    std::string rest = extra;
    if (body.empty() && rest.rfind(",", 0) == 0) rest = rest.substr(1);
    return "{ " + body + rest + " }";
}

// A valid Input -> Hidden -> Output network with only the required keys. `top` is inserted at
// the top level (must end with a comma when non-empty); `in`, `hid` and `out` are added inside
// the layer objects (must start with a comma when non-empty) and replace the default N / DataSet.
std::string net(const std::string& top = "", const std::string& in = "",
                const std::string& hid = "", const std::string& out = "") {
    return "{ " + top + " \"Layers\": [\n        " +
           layer({{"N", "10"}, {"DataSet", "\"x\""}}, in) + ",\n        " +
           layer({{"N", "4"}}, hid) + ",\n        " +
           layer({{"N", "10"}, {"DataSet", "\"y\""}}, out) + " ] }";
}

// ---------------------------------------------------------------- accepted keys and defaults

TEST(ConfigParse, MinimalNetworkGetsAllDefaults) {
    NetworkConfig c = NetworkConfig::from_json(net());
    EXPECT_EQ(c.version, 0.9);
    EXPECT_EQ(c.name, "");
    EXPECT_STREQ(to_string(c.kind), "FeedForward");
    EXPECT_EQ(c.error_function, ErrorFunction::kCrossEntropy);
    EXPECT_EQ(c.smce.one_target, 0.9f);
    EXPECT_EQ(c.smce.zero_target, 0.1f);
    EXPECT_EQ(c.smce.one_scale, 1.0f);
    EXPECT_EQ(c.smce.zero_scale, 1.0f);
    EXPECT_EQ(c.denoising_p, 0.0f);
    EXPECT_TRUE(c.shuffle_indices);
    ASSERT_EQ(c.layers.size(), 3u);

    const LayerConfig& in = c.layers[0];
    EXPECT_EQ(in.name, "Input0");
    EXPECT_EQ(in.kind, LayerKind::kInput);
    EXPECT_EQ(in.n, 10u);
    EXPECT_FALSE(in.n_auto);
    EXPECT_FALSE(in.sparse);
    EXPECT_EQ(in.dataset, "x");
    EXPECT_TRUE(in.sources.empty());
    EXPECT_EQ(in.p_dropout, 0.0f);

    const LayerConfig& h = c.layers[1];
    EXPECT_EQ(h.name, "Hidden1");
    EXPECT_EQ(h.kind, LayerKind::kHidden);
    EXPECT_EQ(h.n, 4u);
    EXPECT_EQ(h.dataset, "");
    EXPECT_EQ(h.sources, std::vector<std::string>{"Input0"});
    EXPECT_EQ(h.activation, Activation::kSigmoid);
    EXPECT_EQ(h.p_dropout, 0.0f);
    EXPECT_EQ(h.weight_init.scheme, WeightInitScheme::kXavier);
    EXPECT_EQ(h.weight_init.scale, 1.0f);
    EXPECT_EQ(h.weight_init.bias, 0.0f);

    const LayerConfig& out = c.layers[2];
    EXPECT_EQ(out.name, "Output2");
    EXPECT_EQ(out.kind, LayerKind::kOutput);
    EXPECT_EQ(out.dataset, "y");
    EXPECT_EQ(out.sources, std::vector<std::string>{"Hidden1"});
    EXPECT_EQ(out.activation, Activation::kSigmoid);
}

TEST(ConfigParse, EveryTopLevelKeyIsRead) {
    NetworkConfig c = NetworkConfig::from_json(net(R"(
        "Version": 0.81, "Name": "My net", "Kind": "AutoEncoder",
        "ErrorFunction": "ScaledMarginalCrossEntropy",
        "ScaledMarginalCrossEntropy": { "oneTarget": 1.0, "zeroTarget": 0.0, "oneScale": 30.0,
                                        "zeroScale": 2.5 },
        "Denoising": { "p": 0.2 }, "ShuffleIndices": false,)"));
    EXPECT_EQ(c.version, 0.81);
    EXPECT_EQ(c.name, "My net");
    EXPECT_STREQ(to_string(c.kind), "AutoEncoder");
    EXPECT_EQ(c.error_function, ErrorFunction::kScaledMarginalCrossEntropy);
    EXPECT_EQ(c.smce.one_target, 1.0f);
    EXPECT_EQ(c.smce.zero_target, 0.0f);
    EXPECT_EQ(c.smce.one_scale, 30.0f);
    EXPECT_EQ(c.smce.zero_scale, 2.5f);
    EXPECT_EQ(c.denoising_p, 0.2f);
    EXPECT_FALSE(c.shuffle_indices);
}

TEST(ConfigParse, EveryLayerKeyIsRead) {
    NetworkConfig c = NetworkConfig::from_json(R"({ "Layers": [
        { "Name": "in", "Kind": "Input", "Type": "FullyConnected", "N": "auto", "Sparse": true,
          "DataSet": "gl_input", "pDropout": 0.25 },
        { "Name": "h", "Kind": "Hidden", "Type": "FullyConnected", "N": [128], "Sparse": true,
          "Source": "in", "Activation": "Relu", "pDropout": 0.5,
          "WeightInit": { "Scheme": "Gaussian", "Scale": 0.01, "Bias": 0.5 } },
        { "Name": "out", "Kind": "Output", "Type": "FullyConnected", "N": 7, "Sparse": false,
          "DataSet": "gl_output", "Source": ["h", "in"], "Activation": "SoftMax",
          "WeightInit": { "Scheme": "Constant", "Scale": -2, "Bias": -10.2 } } ] })");
    ASSERT_EQ(c.layers.size(), 3u);
    const LayerConfig& in = c.layers[0];
    EXPECT_EQ(in.name, "in");
    EXPECT_EQ(in.kind, LayerKind::kInput);
    EXPECT_TRUE(in.n_auto);
    EXPECT_EQ(in.n, 0u);
    EXPECT_TRUE(in.sparse);
    EXPECT_EQ(in.dataset, "gl_input");
    EXPECT_EQ(in.p_dropout, 0.25f);
    const LayerConfig& h = c.layers[1];
    EXPECT_EQ(h.name, "h");
    EXPECT_EQ(h.n, 128u);
    EXPECT_FALSE(h.n_auto);
    EXPECT_TRUE(h.sparse);
    EXPECT_EQ(h.sources, std::vector<std::string>{"in"});
    EXPECT_EQ(h.activation, Activation::kRectifiedLinear);
    EXPECT_EQ(h.p_dropout, 0.5f);
    EXPECT_EQ(h.weight_init.scheme, WeightInitScheme::kGaussian);
    EXPECT_EQ(h.weight_init.scale, 0.01f);
    EXPECT_EQ(h.weight_init.bias, 0.5f);
    const LayerConfig& out = c.layers[2];
    EXPECT_EQ(out.n, 7u);
    EXPECT_FALSE(out.sparse);
    EXPECT_EQ(out.dataset, "gl_output");
    EXPECT_EQ(out.sources, (std::vector<std::string>{"h", "in"}));
    EXPECT_EQ(out.activation, Activation::kSoftMax);
    EXPECT_EQ(out.weight_init.scheme, WeightInitScheme::kConstant);
    EXPECT_EQ(out.weight_init.scale, -2.0f);
    EXPECT_EQ(out.weight_init.bias, -10.2f);
}

TEST(ConfigParse, KeysAreCaseInsensitive) {
    NetworkConfig c = NetworkConfig::from_json(R"({
        "VERSION": 0.75, "name": "n", "KIND": "feedforward", "errorfunction": "l2",
        "scaledmarginalcrossentropy": { "ONETARGET": 0.8, "zerotarget": 0.2, "OneScale": 3,
                                        "ZEROSCALE": 4 },
        "DENOISING": { "P": 0.1 }, "shuffleindices": false,
        "layers": [
          { "NAME": "a", "kind": "INPUT", "TYPE": "fullyconnected", "n": 3, "sparse": true,
            "dataset": "d", "PDROPOUT": 0.125 },
          { "name": "b", "KIND": "hidden", "n": 2, "source": "a", "activation": "tanh",
            "pdropout": 0.5, "weightinit": { "scheme": "uniform", "SCALE": 2, "bias": 1 } },
          { "Name": "c", "Kind": "output", "N": 3, "DATASET": "e", "SOURCE": ["b"],
            "ACTIVATION": "LINEAR" } ] })");
    EXPECT_EQ(c.version, 0.75);
    EXPECT_EQ(c.name, "n");
    EXPECT_STREQ(to_string(c.kind), "FeedForward");
    EXPECT_EQ(c.error_function, ErrorFunction::kL2);
    EXPECT_EQ(c.smce.one_target, 0.8f);
    EXPECT_EQ(c.smce.zero_target, 0.2f);
    EXPECT_EQ(c.smce.one_scale, 3.0f);
    EXPECT_EQ(c.smce.zero_scale, 4.0f);
    EXPECT_EQ(c.denoising_p, 0.1f);
    EXPECT_FALSE(c.shuffle_indices);
    ASSERT_EQ(c.layers.size(), 3u);
    EXPECT_EQ(c.layers[0].name, "a");
    EXPECT_TRUE(c.layers[0].sparse);
    EXPECT_EQ(c.layers[0].dataset, "d");
    EXPECT_EQ(c.layers[0].p_dropout, 0.125f);
    EXPECT_EQ(c.layers[1].activation, Activation::kTanh);
    EXPECT_EQ(c.layers[1].p_dropout, 0.5f);
    EXPECT_EQ(c.layers[1].weight_init.scheme, WeightInitScheme::kUniform);
    EXPECT_EQ(c.layers[1].weight_init.scale, 2.0f);
    EXPECT_EQ(c.layers[1].weight_init.bias, 1.0f);
    EXPECT_EQ(c.layers[2].kind, LayerKind::kOutput);
    EXPECT_EQ(c.layers[2].dataset, "e");
    EXPECT_EQ(c.layers[2].sources, std::vector<std::string>{"b"});
    EXPECT_EQ(c.layers[2].activation, Activation::kLinear);
}

TEST(ConfigParse, ActivationValuesAndAliasesAreCaseInsensitive) {
    const std::vector<std::pair<std::string, Activation>> cases = {
        {"Sigmoid", Activation::kSigmoid},
        {"sigmoid", Activation::kSigmoid},
        {"TANH", Activation::kTanh},
        {"RectifiedLinear", Activation::kRectifiedLinear},
        {"rectifiedlinear", Activation::kRectifiedLinear},
        {"Relu", Activation::kRectifiedLinear},
        {"RELU", Activation::kRectifiedLinear},
        {"Linear", Activation::kLinear},
        {"SoftMax", Activation::kSoftMax},
        {"softmax", Activation::kSoftMax},
        {"LeakyRectifiedLinear", Activation::kLeakyRectifiedLinear},
        {"LRelu", Activation::kLeakyRectifiedLinear},
        {"lrelu", Activation::kLeakyRectifiedLinear},
        {"ExponentialLinear", Activation::kExponentialLinear},
        {"Elu", Activation::kExponentialLinear},
        {"ELU", Activation::kExponentialLinear},
        {"ScaledExponentialLinear", Activation::kScaledExponentialLinear},
        {"Selu", Activation::kScaledExponentialLinear},
        {"SoftPlus", Activation::kSoftPlus},
        {"softplus", Activation::kSoftPlus},
        {"SoftSign", Activation::kSoftSign},
        {"SOFTSIGN", Activation::kSoftSign},
    };
    for (const auto& [text, value] : cases) {
        SCOPED_TRACE(text);
        NetworkConfig c = NetworkConfig::from_json(net("", "", R"(, "Activation": ")" + text + "\"",
                                                       R"(, "Activation": ")" + text + "\""));
        EXPECT_EQ(c.layers[1].activation, value);
        EXPECT_EQ(c.layers[2].activation, value);
    }
}

TEST(ConfigParse, ErrorFunctionValuesAndAliases) {
    const std::vector<std::pair<std::string, ErrorFunction>> cases = {
        {"L2", ErrorFunction::kL2},
        {"l2", ErrorFunction::kL2},
        {"CrossEntropy", ErrorFunction::kCrossEntropy},
        {"crossentropy", ErrorFunction::kCrossEntropy},
        {"Cross Entropy", ErrorFunction::kCrossEntropy},
        {"cross entropy", ErrorFunction::kCrossEntropy},
        {"ScaledMarginalCrossEntropy", ErrorFunction::kScaledMarginalCrossEntropy},
        {"SCALEDMARGINALCROSSENTROPY", ErrorFunction::kScaledMarginalCrossEntropy},
        {"L1", ErrorFunction::kL1},
        {"l1", ErrorFunction::kL1},
        {"L2Hinge", ErrorFunction::kL2Hinge},
        {"l2hinge", ErrorFunction::kL2Hinge},
        {"Hinge", ErrorFunction::kHinge},
        {"HINGE", ErrorFunction::kHinge},
        {"DataScaledMarginalCrossEntropy", ErrorFunction::kDataScaledMarginalCrossEntropy},
        {"datascaledmarginalcrossentropy", ErrorFunction::kDataScaledMarginalCrossEntropy},
    };
    for (const auto& [text, value] : cases) {
        SCOPED_TRACE(text);
        NetworkConfig c = NetworkConfig::from_json(net(R"("ErrorFunction": ")" + text + "\","));
        EXPECT_EQ(c.error_function, value);
    }
}

TEST(ConfigParse, WeightInitSchemesAreCaseInsensitive) {
    const std::vector<std::pair<std::string, WeightInitScheme>> cases = {
        {"Xavier", WeightInitScheme::kXavier},
        {"xavier", WeightInitScheme::kXavier},
        {"Gaussian", WeightInitScheme::kGaussian},
        {"GAUSSIAN", WeightInitScheme::kGaussian},
        {"Uniform", WeightInitScheme::kUniform},
        {"uniform", WeightInitScheme::kUniform},
        {"Constant", WeightInitScheme::kConstant},
        {"cOnStAnT", WeightInitScheme::kConstant},
        {"CaffeXavier", WeightInitScheme::kCaffeXavier},
        {"caffexavier", WeightInitScheme::kCaffeXavier},
        {"UnitBall", WeightInitScheme::kUnitBall},
        {"UNITBALL", WeightInitScheme::kUnitBall},
        {"SELU", WeightInitScheme::kSelu},
        {"selu", WeightInitScheme::kSelu},
    };
    for (const auto& [text, value] : cases) {
        SCOPED_TRACE(text);
        NetworkConfig c = NetworkConfig::from_json(
            net("", "", R"(, "WeightInit": { "Scheme": ")" + text + "\" }"));
        EXPECT_EQ(c.layers[1].weight_init.scheme, value);
        EXPECT_EQ(c.layers[1].weight_init.scale, 1.0f);
        EXPECT_EQ(c.layers[1].weight_init.bias, 0.0f);
    }
}

TEST(ConfigParse, WeightInitKeysAreEachOptional) {
    NetworkConfig c = NetworkConfig::from_json(
        net("", "", R"(, "WeightInit": { "Scale": 0.5 })", R"(, "WeightInit": { "Bias": -3 })"));
    EXPECT_EQ(c.layers[1].weight_init.scheme, WeightInitScheme::kXavier);
    EXPECT_EQ(c.layers[1].weight_init.scale, 0.5f);
    EXPECT_EQ(c.layers[1].weight_init.bias, 0.0f);
    EXPECT_EQ(c.layers[2].weight_init.scheme, WeightInitScheme::kXavier);
    EXPECT_EQ(c.layers[2].weight_init.scale, 1.0f);
    EXPECT_EQ(c.layers[2].weight_init.bias, -3.0f);
}

TEST(ConfigParse, ScaledMarginalCrossEntropyKeysAreEachOptional) {
    NetworkConfig c =
        NetworkConfig::from_json(net(R"("ScaledMarginalCrossEntropy": { "oneScale": 30 },)"));
    EXPECT_EQ(c.smce.one_target, 0.9f);
    EXPECT_EQ(c.smce.zero_target, 0.1f);
    EXPECT_EQ(c.smce.one_scale, 30.0f);
    EXPECT_EQ(c.smce.zero_scale, 1.0f);
    NetworkConfig e = NetworkConfig::from_json(net(R"("ScaledMarginalCrossEntropy": {},)"));
    EXPECT_EQ(e.smce, SmceParams{});
    NetworkConfig d = NetworkConfig::from_json(net(R"("Denoising": {},)"));
    EXPECT_EQ(d.denoising_p, 0.0f);
}

TEST(ConfigParse, TopLevelKindValues) {
    EXPECT_STREQ(to_string(NetworkConfig::from_json(net(R"("Kind": "FeedForward",)")).kind),
                 "FeedForward");
    EXPECT_STREQ(to_string(NetworkConfig::from_json(net(R"("Kind": "FEEDFORWARD",)")).kind),
                 "FeedForward");
    EXPECT_STREQ(to_string(NetworkConfig::from_json(net(R"("Kind": "autoencoder",)")).kind),
                 "AutoEncoder");
}

TEST(ConfigParse, NAcceptsIntegerOneElementArrayAutoAndIntegralReals) {
    NetworkConfig c = NetworkConfig::from_json(R"({ "Layers": [
        { "N": "AUTO", "DataSet": "x" }, { "N": [3] }, { "N": 4.0 },
        { "N": "Auto", "DataSet": "y" } ] })");
    EXPECT_TRUE(c.layers[0].n_auto);
    EXPECT_EQ(c.layers[1].n, 3u);
    EXPECT_EQ(c.layers[2].n, 4u);
    EXPECT_TRUE(c.layers[3].n_auto);
    EXPECT_EQ(NetworkConfig::from_json(net("", "", R"(, "N": 4294967295)", "")).layers[1].n,
              4294967295u);
}

TEST(ConfigParse, KindDefaultsByPositionAndExplicitKindsOverride) {
    NetworkConfig c = NetworkConfig::from_json(R"({ "Layers": [
        { "N": 2, "DataSet": "a" },
        { "Kind": "Input", "N": 3, "DataSet": "b" },
        { "N": 4, "Source": ["Input0", "Input1"] },
        { "Kind": "Output", "N": 5, "DataSet": "c" },
        { "Kind": "Hidden", "N": 6, "Source": "Hidden2" },
        { "N": 7, "DataSet": "d", "Source": "Hidden4" } ] })");
    ASSERT_EQ(c.layers.size(), 6u);
    EXPECT_EQ(c.layers[0].kind, LayerKind::kInput);
    EXPECT_EQ(c.layers[1].kind, LayerKind::kInput);
    EXPECT_EQ(c.layers[1].name, "Input1");
    EXPECT_EQ(c.layers[2].kind, LayerKind::kHidden);
    EXPECT_EQ(c.layers[3].kind, LayerKind::kOutput);
    EXPECT_EQ(c.layers[3].name, "Output3");
    EXPECT_EQ(c.layers[3].sources, std::vector<std::string>{"Hidden2"});  // previous layer
    EXPECT_EQ(c.layers[4].name, "Hidden4");
    EXPECT_EQ(c.layers[5].kind, LayerKind::kOutput);
    EXPECT_EQ(c.layers[5].name, "Output5");
}

TEST(ConfigParse, DanglingLayersAreAllowed) {
    // DSSTNE's tst/test_data/validate_L2_02.json: the hidden layer feeds nothing.
    NetworkConfig c = NetworkConfig::from_json(R"({ "Layers": [
        { "Name": "Input", "Kind": "Input", "N": 1, "DataSet": "input" },
        { "Name": "Hidden", "Kind": "Hidden", "Source": "Input", "N": 4 },
        { "Name": "Output", "Kind": "Output", "DataSet": "output", "N": 1, "Source": ["Input"] }
    ] })");
    EXPECT_EQ(c.layers[2].sources, std::vector<std::string>{"Input"});
}

TEST(ConfigParse, CommentsAndTrailingCommasAreAllowed) {
    NetworkConfig c = NetworkConfig::from_json("// a comment\n" + net() + " /* trailing */");
    EXPECT_EQ(c.layers.size(), 3u);
    NetworkConfig t = NetworkConfig::from_json(
        R"({ "Layers": [ { "N": 2, "DataSet": "x", }, { "N": 2, "DataSet": "y" }, ], })");
    EXPECT_EQ(t.layers.size(), 2u);
}

TEST(ConfigFindLayer, FindsByExactName) {
    NetworkConfig c = NetworkConfig::from_json(net());
    ASSERT_NE(c.find_layer("Hidden1"), nullptr);
    EXPECT_EQ(c.find_layer("Hidden1")->n, 4u);
    EXPECT_EQ(c.find_layer("Output2"), &c.layers[2]);
    EXPECT_EQ(c.find_layer("hidden1"), nullptr);
    EXPECT_EQ(c.find_layer("nope"), nullptr);
}

TEST(ConfigToString, EnumNamesUseDsstneSpelling) {
    EXPECT_STREQ(to_string(LayerKind::kInput), "Input");
    EXPECT_STREQ(to_string(LayerKind::kHidden), "Hidden");
    EXPECT_STREQ(to_string(LayerKind::kOutput), "Output");
    EXPECT_STREQ(to_string(Activation::kSigmoid), "Sigmoid");
    EXPECT_STREQ(to_string(Activation::kTanh), "Tanh");
    EXPECT_STREQ(to_string(Activation::kRectifiedLinear), "RectifiedLinear");
    EXPECT_STREQ(to_string(Activation::kLinear), "Linear");
    EXPECT_STREQ(to_string(Activation::kSoftMax), "SoftMax");
    EXPECT_STREQ(to_string(ErrorFunction::kL2), "L2");
    EXPECT_STREQ(to_string(ErrorFunction::kCrossEntropy), "CrossEntropy");
    EXPECT_STREQ(to_string(ErrorFunction::kScaledMarginalCrossEntropy),
                 "ScaledMarginalCrossEntropy");
    EXPECT_STREQ(to_string(WeightInitScheme::kXavier), "Xavier");
    EXPECT_STREQ(to_string(WeightInitScheme::kGaussian), "Gaussian");
    EXPECT_STREQ(to_string(WeightInitScheme::kUniform), "Uniform");
    EXPECT_STREQ(to_string(WeightInitScheme::kConstant), "Constant");
    EXPECT_STREQ(to_string(Activation::kLeakyRectifiedLinear), "LeakyRectifiedLinear");
    EXPECT_STREQ(to_string(Activation::kExponentialLinear), "ExponentialLinear");
    EXPECT_STREQ(to_string(Activation::kScaledExponentialLinear), "ScaledExponentialLinear");
    EXPECT_STREQ(to_string(Activation::kSoftPlus), "SoftPlus");
    EXPECT_STREQ(to_string(Activation::kSoftSign), "SoftSign");
    EXPECT_STREQ(to_string(ErrorFunction::kL1), "L1");
    EXPECT_STREQ(to_string(ErrorFunction::kL2Hinge), "L2Hinge");
    EXPECT_STREQ(to_string(ErrorFunction::kHinge), "Hinge");
    EXPECT_STREQ(to_string(ErrorFunction::kDataScaledMarginalCrossEntropy),
                 "DataScaledMarginalCrossEntropy");
    EXPECT_STREQ(to_string(WeightInitScheme::kCaffeXavier), "CaffeXavier");
    EXPECT_STREQ(to_string(WeightInitScheme::kUnitBall), "UnitBall");
    EXPECT_STREQ(to_string(WeightInitScheme::kSelu), "SELU");
}

TEST(ConfigEquality, ComparesEveryField) {
    const NetworkConfig base = NetworkConfig::from_json(net());
    EXPECT_EQ(base, NetworkConfig::from_json(net()));
    auto differs = [&](auto mutate) {
        NetworkConfig c = base;
        mutate(c);
        return !(c == base);
    };
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.version = 0.8; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.name = "x"; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.kind = NetworkKind::kAutoEncoder; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.error_function = ErrorFunction::kL2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.smce.one_target = 1; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.smce.zero_target = 0; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.smce.one_scale = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.smce.zero_scale = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.denoising_p = 0.5f; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.shuffle_indices = false; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers.pop_back(); }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].name = "z"; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].kind = LayerKind::kOutput; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].n = 5; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[0].n_auto = true; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].sparse = true; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[0].dataset = "q"; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].sources.push_back("q"); }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].activation = Activation::kTanh; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].p_dropout = 0.5f; }));
    EXPECT_TRUE(differs(
        [](NetworkConfig& c) { c.layers[1].weight_init.scheme = WeightInitScheme::kUniform; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].weight_init.scale = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].weight_init.bias = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.sparseness_penalty.p = 0.5f; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.sparseness_penalty.beta = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.activation_defaults.relu_slope = 0.1f; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.activation_defaults.elu_alpha = 0.1f; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.activation_defaults.selu_lambda = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[1].weight_norm = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) { c.layers[2].delta_norm = 2; }));
    // Activation parameters count where the activation uses them, the sparseness penalty on
    // sparse Hidden layers (to_json writes exactly these).
    EXPECT_FALSE(differs([](NetworkConfig& c) { c.layers[1].relu_slope = 0.1f; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) {
        c.layers[1].activation = Activation::kLeakyRectifiedLinear;
        c.layers[1].relu_slope = 0.1f;
    }));
    EXPECT_FALSE(differs([](NetworkConfig& c) { c.layers[1].elu_alpha = 0.1f; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) {
        c.layers[1].activation = Activation::kExponentialLinear;
        c.layers[1].elu_alpha = 0.1f;
    }));
    EXPECT_FALSE(differs([](NetworkConfig& c) { c.layers[2].selu_lambda = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) {
        c.layers[2].activation = Activation::kScaledExponentialLinear;
        c.layers[2].selu_lambda = 2;
    }));
    EXPECT_FALSE(differs([](NetworkConfig& c) { c.layers[1].sparseness_penalty.beta = 2; }));
    EXPECT_TRUE(differs([](NetworkConfig& c) {
        c.layers[1].sparse = true;
        c.layers[1].sparseness_penalty.beta = 2;
    }));
}

// ---------------------------------------------------------------- not implemented yet

TEST(ConfigNotImplemented, DsstneTopLevelKeysAreRejectedByName) {
    const std::vector<std::pair<std::string, std::string>> keys = {
        {"WeightsData", R"("w.nc")"},
        {"LocalResponseNormalization", R"({ "k": 2, "n": 5, "alpha": 0.0001, "beta": 0.75 })"},
        {"LRN", R"({ "k": 2 })"},
        {"Maxout", R"({ "k": 2 })"},
    };
    for (const auto& [key, value] : keys) {
        expect_not_implemented(net("\"" + key + "\": " + value + ","), "$." + key, key);
    }
    // Case-insensitive, and the message names the canonical key.
    expect_not_implemented(net(R"("maxout": { "k": 2 },)"), "$.maxout", "Maxout");
}

TEST(ConfigNotImplemented, DsstneLayerKeysAreRejectedByName) {
    const std::vector<std::pair<std::string, std::string>> keys = {
        {"Kernel", "[7, 7]"},
        {"KernelStride", "[1, 1]"},
        {"BatchNormalization", "true"},
        {"Function", R"("Max")"},
    };
    for (const auto& [key, value] : keys) {
        expect_not_implemented(net("", "", ", \"" + key + "\": " + value), "$.Layers[1]." + key,
                               key);
    }
    expect_not_implemented(net("", "", "", R"(, "batchnormalization": true)"),
                           "$.Layers[2].batchnormalization", "BatchNormalization");
}

TEST(ConfigNotImplemented, DsstneActivationValuesAreRejectedByName) {
    // DSSTNE's enum has them but no kernel (they silently act as the identity there).
    for (const std::string a : {"ReluMax", "LinearMax"}) {
        expect_not_implemented(net("", "", ", \"Activation\": \"" + a + "\""),
                               "$.Layers[1].Activation", "Activation " + a);
    }
    expect_not_implemented(net("", "", R"(, "Activation": "relumax")"), "$.Layers[1].Activation",
                           "Activation ReluMax");
}

TEST(ConfigNotImplemented, TargetKindConvolutionalAndPoolingTypes) {
    expect_not_implemented(net("", "", R"(, "Kind": "Target")"), "$.Layers[1].Kind", "Kind Target");
    expect_not_implemented(net("", R"(, "Type": "Convolutional")"), "$.Layers[0].Type",
                           "Type Convolutional");
    expect_not_implemented(net("", "", R"(, "Type": "pooling")"), "$.Layers[1].Type",
                           "Type Pooling");
}

TEST(ConfigNotImplemented, MultiDimensionalN) {
    expect_not_implemented(net("", "", R"(, "N": [32, 32])"), "$.Layers[1].N", "N [32, 32]");
    expect_not_implemented(net("", "", R"(, "N": [2, 3, 4, 5])"), "$.Layers[1].N",
                           "N [2, 3, 4, 5]");
}

// ---------------------------------------------------------------- unknown keys

TEST(ConfigUnknownKey, TopLevelNamesPathAndListsValidKeys) {
    expect_config_error(
        net(R"("Optimizer": "sgd",)"),
        {"net.json: $.Optimizer: unknown key \"Optimizer\"",
         "expected one of the keys valid here: Version, Name, Kind, "
         "ErrorFunction, ScaledMarginalCrossEntropy, "
         "DataScaledMarginalCrossEntropy, Denoising, SparsenessPenalty, DeltaBoost, RELUSlope, "
         "Slope, ELUAlpha, SELULambda, ShuffleIndices, Decay, Training, Layers"});
}

TEST(ConfigUnknownKey, LayerLevelNamesPathAndListsValidKeys) {
    expect_config_error(net("", "", R"(, "Dropout": 0.5)"),
                        {"$.Layers[1].Dropout: unknown key \"Dropout\"",
                         "Name, Kind, Type, N, Sparse, DataSet, Source, Skip, SharedWeights, "
                         "Activation, RELUSlope, Slope, ELUAlpha, SELULambda, pDropout, "
                         "Normalize, WeightInit, WeightNorm, DeltaNorm, SparsenessPenalty"});
}

TEST(ConfigUnknownKey, NestedObjectsNamePathAndListValidKeys) {
    expect_config_error(net("", "", R"(, "WeightInit": { "Sigma": 1 })"),
                        {"$.Layers[1].WeightInit.Sigma: unknown key", "Scheme, Scale, Bias"});
    expect_config_error(net(R"("ScaledMarginalCrossEntropy": { "one": 1 },)"),
                        {"$.ScaledMarginalCrossEntropy.one: unknown key",
                         "oneTarget, zeroTarget, oneScale, zeroScale"});
    expect_config_error(net(R"("Denoising": { "q": 0.1 },)"),
                        {"$.Denoising.q: unknown key", "expected one of the keys valid here: p"});
}

TEST(ConfigUnknownKey, DocumentedButNeverParsedDsstneKeysAreUnknown) {
    // LDL.txt documents these, but DSSTNE's parser never accepted them (reference §2.7).
    expect_config_error(net("", "", R"(, "L1Penalty": 0.1)"), {"$.Layers[1].L1Penalty"});
    expect_config_error(net("", "", R"(, "Recurrent": "LSTM")"), {"$.Layers[1].Recurrent"});
    expect_config_error(net(R"("TrainingParameters": {},)"), {"$.TrainingParameters"});
    expect_config_error(net(R"("MiniBatch": 256,)"), {"$.MiniBatch"});
}

TEST(ConfigUnknownKey, KeysDifferingOnlyByCaseAreRejected) {
    expect_config_error(net(R"("Name": "a", "name": "b",)"),
                        {"net.json: $: keys ", "\"Name\"", "\"name\"", "differ only by case"});
    expect_config_error(net("", "", R"(, "pDropout": 0.1, "PDROPOUT": 0.2)"),
                        {"$.Layers[1]: keys", "differ only by case"});
    expect_config_error(net("", "", R"(, "WeightInit": { "Scale": 1, "scale": 2 })"),
                        {"$.Layers[1].WeightInit: keys", "differ only by case"});
}

TEST(ConfigUnknownKey, ExactDuplicateKeysAreMalformedJson) {
    expect_config_error(net(R"("Name": "a", "Name": "b",)"), {"malformed JSON", "Duplicate key"});
}

// ---------------------------------------------------------------- wrong types

TEST(ConfigWrongType, TopLevelKeys) {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {R"("Version": "0.8",)", {"$.Version: wrong type: found string \"0.8\"", "a number"}},
        {R"("Name": 5,)", {"$.Name: wrong type: found integer 5", "a string"}},
        {R"("Kind": true,)", {"$.Kind: wrong type: found boolean true", "a string"}},
        {R"("ErrorFunction": 3,)", {"$.ErrorFunction: wrong type: found integer 3", "a string"}},
        {R"("ScaledMarginalCrossEntropy": 1,)",
         {"$.ScaledMarginalCrossEntropy: wrong type: found integer 1", "an object"}},
        {R"("ScaledMarginalCrossEntropy": { "oneTarget": "a" },)",
         {"$.ScaledMarginalCrossEntropy.oneTarget: wrong type: found string \"a\"", "a number"}},
        {R"("Denoising": 0.2,)", {"$.Denoising: wrong type: found number 0.2", "an object"}},
        {R"("Denoising": { "p": null },)", {"$.Denoising.p: wrong type: found null", "a number"}},
        {R"("ShuffleIndices": "false",)",
         {"$.ShuffleIndices: wrong type: found string \"false\"", "a boolean"}},
        {R"("ShuffleIndices": 0,)", {"$.ShuffleIndices: wrong type: found integer 0", "a boolean"}},
    };
    for (const auto& [top, parts] : cases) expect_config_error(net(top), parts);
    expect_config_error(R"({ "Layers": { "N": 3 } })",
                        {"$.Layers: wrong type: found object", "a non-empty array"});
    expect_config_error(R"({ "Layers": "x" })", {"$.Layers: wrong type", "array"});
    expect_config_error(R"([1, 2])", {"net.json: $: wrong type: found array", "a JSON object"});
    expect_config_error(R"("text")", {"net.json: $: wrong type: found string", "a JSON object"});
}

TEST(ConfigWrongType, LayerKeys) {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {R"(, "Name": 3)", {"$.Layers[1].Name: wrong type: found integer 3", "a non-empty string"}},
        {R"(, "Kind": true)", {"$.Layers[1].Kind: wrong type: found boolean true", "a string"}},
        {R"(, "Type": 1)", {"$.Layers[1].Type: wrong type: found integer 1", "FullyConnected"}},
        {R"(, "N": true)", {"$.Layers[1].N: wrong type: found boolean true", "a positive integer"}},
        {R"(, "N": {})", {"$.Layers[1].N: wrong type: found object", "a positive integer"}},
        {R"(, "N": [true])",
         {"$.Layers[1].N[0]: wrong type: found boolean true", "a positive integer"}},
        {R"(, "Sparse": 1)", {"$.Layers[1].Sparse: wrong type: found integer 1", "a boolean"}},
        {R"(, "Sparse": "true")", {"$.Layers[1].Sparse: wrong type: found string", "a boolean"}},
        {R"(, "Source": 5)", {"$.Layers[1].Source: wrong type: found integer 5", "a layer name"}},
        {R"(, "Source": ["Input0", 5])",
         {"$.Layers[1].Source[1]: wrong type: found integer 5", "a non-empty string"}},
        {R"(, "Activation": 1)",
         {"$.Layers[1].Activation: wrong type: found integer 1", "Sigmoid"}},
        {R"(, "pDropout": "x")",
         {"$.Layers[1].pDropout: wrong type: found string \"x\"", "a number in [0, 1)"}},
        {R"(, "pDropout": true)", {"$.Layers[1].pDropout: wrong type: found boolean true"}},
        {R"(, "WeightInit": "Xavier")",
         {"$.Layers[1].WeightInit: wrong type: found string \"Xavier\"", "an object"}},
        {R"(, "WeightInit": { "Scheme": 1 })",
         {"$.Layers[1].WeightInit.Scheme: wrong type: found integer 1", "Xavier"}},
        {R"(, "WeightInit": { "Scale": "1" })",
         {"$.Layers[1].WeightInit.Scale: wrong type: found string \"1\"", "a number"}},
        {R"(, "WeightInit": { "Bias": null })",
         {"$.Layers[1].WeightInit.Bias: wrong type: found null", "a number"}},
    };
    for (const auto& [hid, parts] : cases) expect_config_error(net("", "", hid), parts);
    expect_config_error(net("", R"(, "DataSet": 5)"),
                        {"$.Layers[0].DataSet: wrong type: found integer 5", "a dataset name"});
    expect_config_error(R"({ "Layers": [ "Input", { "N": 1, "DataSet": "y" } ] })",
                        {"$.Layers[0]: wrong type: found string \"Input\"", "a layer object"});
}

// ---------------------------------------------------------------- bad values

TEST(ConfigBadValue, PDropoutOutOfRange) {
    expect_config_error(net("", "", R"(, "pDropout": 1.5)"),
                        {"$.Layers[1].pDropout: value 1.5 is out of range", "[0, 1)"});
    expect_config_error(net("", "", R"(, "pDropout": -0.1)"),
                        {"$.Layers[1].pDropout: value -0.1 is out of range", "[0, 1)"});
    expect_config_error(net("", R"(, "pDropout": 1)"),
                        {"$.Layers[0].pDropout: value 1 is out of range"});
    EXPECT_EQ(NetworkConfig::from_json(net("", "", R"(, "pDropout": 0)")).layers[1].p_dropout,
              0.0f);
}

TEST(ConfigBadValue, NMustBeAPositiveInteger) {
    expect_config_error(net("", "", R"(, "N": 0)"),
                        {"$.Layers[1].N: value 0 is out of range", "a positive integer"});
    expect_config_error(net("", "", R"(, "N": -3)"),
                        {"$.Layers[1].N: value -3 is out of range", "a positive integer"});
    expect_config_error(net("", "", R"(, "N": 2.5)"),
                        {"$.Layers[1].N: value 2.5 is not an integer", "a positive integer"});
    expect_config_error(net("", "", R"(, "N": 1e10)"),
                        {"$.Layers[1].N: value 1e+10 is out of range", "4294967295"});
    expect_config_error(net("", "", R"(, "N": [0])"), {"$.Layers[1].N[0]: value 0"});
    expect_config_error(net("", "", R"(, "N": [])"), {"$.Layers[1].N: array of 0 element(s)"});
    expect_config_error(net("", "", R"(, "N": [1, 2, 3, 4, 5])"),
                        {"$.Layers[1].N: array of 5 element(s)", "1 to 4"});
    expect_config_error(net("", R"(, "N": "many")"),
                        {"$.Layers[0].N: unknown value \"many\"", "\"auto\""});
}

TEST(ConfigBadValue, AutoNOnlyOnInputAndOutputLayers) {
    expect_config_error(
        net("", "", R"(, "N": "auto")"),
        {"$.Layers[1].N: \"auto\" is not allowed on Hidden layers", "expected a positive integer"});
}

TEST(ConfigBadValue, VersionBelowMinimum) {
    expect_config_error(net(R"("Version": 0.6,)"),
                        {"$.Version: version 0.6 is too old", "a number >= 0.7"});
    expect_config_error(net(R"("Version": -1,)"), {"$.Version: version -1 is too old"});
    EXPECT_EQ(NetworkConfig::from_json(net(R"("Version": 0.7,)")).version, 0.7);
    EXPECT_EQ(NetworkConfig::from_json(net(R"("Version": 2,)")).version, 2.0);
}

TEST(ConfigBadValue, UnknownEnumValuesListTheValidOnes) {
    expect_config_error(net("", "", R"(, "Activation": "Swish")"),
                        {"$.Layers[1].Activation: unknown value \"Swish\"",
                         "one of Sigmoid, Tanh, Linear, RectifiedLinear (alias Relu), "
                         "LeakyRectifiedLinear (alias LRelu), ExponentialLinear (alias Elu), "
                         "ScaledExponentialLinear (alias Selu), SoftPlus, SoftSign, SoftMax"});
    expect_config_error(net(R"("ErrorFunction": "MSE",)"),
                        {"$.ErrorFunction: unknown value \"MSE\"",
                         "L1, L2, L2Hinge, Hinge, CrossEntropy (alias \"Cross Entropy\"), "
                         "ScaledMarginalCrossEntropy, DataScaledMarginalCrossEntropy"});
    expect_config_error(net("", "", R"(, "WeightInit": { "Scheme": "He" })"),
                        {"$.Layers[1].WeightInit.Scheme: unknown value \"He\"",
                         "Xavier, CaffeXavier, Gaussian, Uniform, UnitBall, Constant, SELU"});
    expect_config_error(net("", "", R"(, "Kind": "Middle")"),
                        {"$.Layers[1].Kind: unknown value \"Middle\"", "Input, Hidden, Output"});
    expect_config_error(net(R"("Kind": "Recurrent",)"),
                        {"$.Kind: unknown value \"Recurrent\"", "FeedForward, AutoEncoder"});
    expect_config_error(net("", "", R"(, "Type": "Dense")"),
                        {"$.Layers[1].Type: unknown value \"Dense\"", "FullyConnected"});
}

TEST(ConfigBadValue, DenoisingAndSmceRanges) {
    expect_config_error(net(R"("Denoising": { "p": 1.0 },)"),
                        {"$.Denoising.p: value 1 is out of range", "[0, 1)"});
    expect_config_error(net(R"("Denoising": { "p": -0.5 },)"), {"$.Denoising.p: value -0.5"});
    expect_config_error(
        net(R"("ScaledMarginalCrossEntropy": { "oneTarget": 1.5 },)"),
        {"$.ScaledMarginalCrossEntropy.oneTarget: value 1.5 is out of range", "[0, 1]"});
    expect_config_error(net(R"("ScaledMarginalCrossEntropy": { "zeroScale": -1 },)"),
                        {"$.ScaledMarginalCrossEntropy.zeroScale: value -1", ">= 0"});
}

TEST(ConfigBadValue, WeightInitScaleAndFloatRange) {
    expect_config_error(net("", "", R"(, "WeightInit": { "Scheme": "Gaussian", "Scale": -1 })"),
                        {"$.Layers[1].WeightInit.Scale: value -1 is out of range", ">= 0"});
    EXPECT_EQ(NetworkConfig::from_json(
                  net("", "", R"(, "WeightInit": { "Scheme": "Constant", "Scale": -1 })"))
                  .layers[1]
                  .weight_init.scale,
              -1.0f);
    expect_config_error(net("", "", R"(, "WeightInit": { "Bias": 1e39 })"),
                        {"$.Layers[1].WeightInit.Bias: value 1e+39 does not fit a 32-bit float"});
}

TEST(ConfigBadValue, LayersMissingOrEmpty) {
    expect_config_error(R"({ "Name": "x" })",
                        {"net.json: $.Layers: missing required key Layers", "a non-empty array"});
    expect_config_error(R"({ "Layers": [] })", {"$.Layers: empty array", "a non-empty array"});
}

TEST(ConfigBadValue, EmptyNamesAndSourcesAreRejected) {
    expect_config_error(net("", "", R"(, "Name": "")"),
                        {"$.Layers[1].Name: empty string", "a non-empty string"});
    expect_config_error(net("", "", R"(, "Source": [])"),
                        {"$.Layers[1].Source: empty array", "a layer name or a non-empty array"});
    expect_config_error(net("", "", R"(, "Source": "")"), {"$.Layers[1].Source: empty string"});
    expect_config_error(net("", R"(, "DataSet": "")"), {"$.Layers[0].DataSet: empty string"});
}

// ---------------------------------------------------------------- structure

TEST(ConfigStructure, MissingNIsAnError) {
    expect_config_error(R"({ "Layers": [ { "N": 2, "DataSet": "x" }, {},
                                          { "N": 2, "DataSet": "y" } ] })",
                        {"$.Layers[1].N: missing required key N", "the number of units"});
}

TEST(ConfigStructure, MissingDataSetOnInputOrOutput) {
    expect_config_error(R"({ "Layers": [ { "N": 2 }, { "N": 2, "DataSet": "y" } ] })",
                        {"$.Layers[0].DataSet: missing required key DataSet on Input layer",
                         "a non-empty string naming the dataset"});
    expect_config_error(R"({ "Layers": [ { "N": 2, "DataSet": "x" }, { "N": 2 } ] })",
                        {"$.Layers[1].DataSet: missing required key DataSet on Output layer"});
}

TEST(ConfigStructure, KeysNotAllowedOnSomeLayerKinds) {
    expect_config_error(net("", "", R"(, "DataSet": "z")"),
                        {"$.Layers[1].DataSet: DataSet is not allowed on Hidden layers",
                         "DataSet only on Input and Output layers"});
    expect_config_error(net("", R"(, "Source": "Hidden1")"),
                        {"$.Layers[0].Source: Source is not allowed on Input layers"});
    expect_config_error(net("", R"(, "Activation": "Relu")"),
                        {"$.Layers[0].Activation: Activation is not allowed on Input layers"});
    expect_config_error(net("", R"(, "WeightInit": {})"),
                        {"$.Layers[0].WeightInit: WeightInit is not allowed on Input layers"});
    expect_config_error(
        net("", "", "", R"(, "pDropout": 0.5)"),
        {"$.Layers[2].pDropout: pDropout is not allowed on Output layers", "unlike DSSTNE"});
}

TEST(ConfigStructure, DuplicateLayerNames) {
    expect_config_error(R"({ "Layers": [ { "Name": "A", "N": 2, "DataSet": "x" },
                                          { "Name": "A", "N": 3 },
                                          { "Name": "C", "N": 2, "DataSet": "y" } ] })",
                        {"$.Layers[1].Name: duplicate layer name \"A\", already used by "
                         "$.Layers[0]",
                         "unique layer names"});
    // A default name that collides with an explicit one.
    expect_config_error(R"({ "Layers": [ { "Name": "Hidden1", "N": 2, "DataSet": "x" },
                                          { "N": 3 }, { "N": 2, "DataSet": "y" } ] })",
                        {"$.Layers[1].Name: duplicate layer name \"Hidden1\" (the default name"});
    // Names are case-sensitive: these are distinct.
    NetworkConfig c = NetworkConfig::from_json(R"({ "Layers": [
        { "Name": "a", "N": 2, "DataSet": "x" }, { "Name": "A", "N": 3 },
        { "N": 2, "DataSet": "y" } ] })");
    EXPECT_EQ(c.layers[1].name, "A");
}

TEST(ConfigStructure, UnknownSourceNamesPathAndListsLayers) {
    expect_config_error(
        net("", "", R"(, "Source": "Missing")"),
        {"$.Layers[1].Source: unknown layer \"Missing\"", "one of Input0, Hidden1, Output2"});
    expect_config_error(net("", "", "", R"(, "Source": ["Hidden1", "Nope"])"),
                        {"$.Layers[2].Source[1]: unknown layer \"Nope\""});
    expect_config_error(net("", "", R"(, "Source": "input0")"),
                        {"unknown layer \"input0\"", "did you mean \"Input0\"?"});
    expect_config_error(net("", "", "", R"(, "Source": ["Hidden1", "Hidden1"])"),
                        {"$.Layers[2].Source[1]: layer \"Hidden1\" is listed twice"});
}

TEST(ConfigStructure, CyclesAreRejected) {
    expect_config_error(
        R"({ "Layers": [
        { "Name": "In", "N": 2, "DataSet": "x" },
        { "Name": "A", "N": 3, "Source": ["In", "B"] },
        { "Name": "B", "N": 3, "Source": "A" },
        { "Name": "Out", "N": 2, "DataSet": "y", "Source": "B" } ] })",
        {"the layer graph has a cycle", "\"A\"", "\"B\"", "an acyclic graph", "$.Layers["});
    expect_config_error(net("", "", R"(, "Source": "Hidden1")"),
                        {"$.Layers[1].Source: the layer graph has a cycle",
                         "\"Hidden1\" <- "
                         "\"Hidden1\""});
}

TEST(ConfigStructure, NeedsAnInputAndAnOutputLayer) {
    expect_config_error(R"({ "Layers": [ { "N": 2, "DataSet": "x" } ] })",
                        {"$.Layers: no Output layer", "at least one layer with Kind Output"});
    expect_config_error(R"({ "Layers": [ { "Kind": "Hidden", "N": 2, "Source": "Output1" },
                                          { "N": 2, "DataSet": "y" } ] })",
                        {"$.Layers: no Input layer", "at least one layer with Kind Input"});
    expect_config_error(
        R"({ "Layers": [ { "Kind": "Output", "N": 2, "DataSet": "y" },
                                          { "Kind": "Input", "N": 2, "DataSet": "x" } ] })",
        {"$.Layers[0]: Output layer has no Source and no previous layer", "a Source key"});
}

TEST(ConfigStructure, MultipleInputsFeedingOneOutput) {
    NetworkConfig c = NetworkConfig::from_json(R"({ "Layers": [
        { "Name": "a", "N": 2, "DataSet": "x" },
        { "Name": "b", "Kind": "Input", "N": 3, "DataSet": "x2" },
        { "Name": "o", "N": 2, "DataSet": "y", "Source": ["a", "b"] } ] })");
    EXPECT_EQ(c.layers[2].sources, (std::vector<std::string>{"a", "b"}));
}

// ---------------------------------------------------------------- message format

TEST(ConfigMessages, FullMessageFormat) {
    Caught c = parse_error(net("", "", R"(, "pDropout": 1.5)"), "models/ae.json");
    EXPECT_EQ(c.message,
              "models/ae.json: $.Layers[1].pDropout: value 1.5 is out of range; expected a "
              "number in [0, 1)");
    Caught d = parse_error(net("", "", R"(, "Kernel": 3)"), "models/ae.json");
    EXPECT_EQ(d.message, "models/ae.json: $.Layers[1].Kernel: not implemented yet: Kernel");
}

TEST(ConfigMessages, DefaultSourceIsString) {
    try {
        NetworkConfig::from_json(net(R"("Bogus": 1,)"));
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("<string>: $.Bogus: ", 0), 0u) << e.what();
    }
}

TEST(ConfigMessages, PathUsesTheKeySpellingOfTheDocument) {
    expect_config_error(net("", "", R"(, "PDROPOUT": 2)"), {"$.Layers[1].PDROPOUT: value 2"});
    expect_config_error(net("", "", R"(, "weightinit": { "SCHEME": "x" })"),
                        {"$.Layers[1].weightinit.SCHEME: unknown value \"x\""});
}

TEST(ConfigMessages, MalformedJsonNamesSourceLineAndColumn) {
    Caught c = parse_error(
        "{\n  \"Version\": 0.8,\n  \"Layers\": [ { \"N\": 2 \"DataSet\": \"x\" } ]\n}\n",
        "bad.json");
    ASSERT_TRUE(c.thrown);
    EXPECT_EQ(c.category, ErrorCategory::kConfig);
    EXPECT_EQ(c.message.rfind("bad.json: $: malformed JSON: ", 0), 0u) << c.message;
    EXPECT_CONTAINS(c.message, "Line 3");
    EXPECT_CONTAINS(c.message, "Column");
    EXPECT_CONTAINS(c.message, "expected a valid JSON document");
    EXPECT_EQ(c.message.find('\n'), std::string::npos) << c.message;

    Caught empty = parse_error("", "empty.json");
    EXPECT_EQ(empty.category, ErrorCategory::kConfig);
    EXPECT_CONTAINS(empty.message, "empty.json: $: malformed JSON");
    expect_config_error(net() + " extra", {"malformed JSON", "Line 4"});
}

// ---------------------------------------------------------------- from_file

TEST(ConfigFromFile, ReadsFileAndUsesPathAsSource) {
    testing::TempDir dir;
    const std::string good = dir.file("good.json");
    testing::write_file(good, net(R"("Name": "from file",)"));
    EXPECT_EQ(NetworkConfig::from_file(good).name, "from file");

    const std::string bad = dir.file("bad.json");
    testing::write_file(bad, net(R"("Nmae": "typo",)"));
    try {
        NetworkConfig::from_file(bad);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kConfig);
        EXPECT_EQ(std::string(e.what()).rfind(bad + ": $.Nmae: unknown key", 0), 0u) << e.what();
    }
}

TEST(ConfigFromFile, MissingFileOrDirectoryIsAnIoError) {
    testing::TempDir dir;
    const std::string missing = dir.file("missing.json");
    try {
        NetworkConfig::from_file(missing);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kIo);
        EXPECT_CONTAINS(e.what(), missing);
        EXPECT_CONTAINS(e.what(), "no such file");
    }
    try {
        NetworkConfig::from_file(dir.path());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kIo);
        EXPECT_CONTAINS(e.what(), dir.path());
        EXPECT_CONTAINS(e.what(), "directory");
    }
}

// ---------------------------------------------------------------- to_json

void expect_round_trip(const NetworkConfig& c) {
    const std::string json = c.to_json();
    SCOPED_TRACE(json);
    NetworkConfig back = NetworkConfig::from_json(json, "<to_json>");
    EXPECT_TRUE(back == c);
    EXPECT_EQ(back.to_json(), json);  // canonical: a fixed point
}

void expect_round_trip(const std::string& json) {
    SCOPED_TRACE(json);
    expect_round_trip(NetworkConfig::from_json(json));
}

TEST(ConfigToJson, MinimalNetworkWritesEveryKeyExplicitly) {
    const std::string j = NetworkConfig::from_json(net()).to_json();
    for (const char* key :
         {"\"Version\": 0.9", "\"Name\": \"\"", "\"Kind\": \"FeedForward\"",
          "\"ErrorFunction\": \"CrossEntropy\"",
          "\"ScaledMarginalCrossEntropy\": { \"oneTarget\": 0.9, \"zeroTarget\": 0.1, "
          "\"oneScale\": 1, \"zeroScale\": 1 }",
          "\"Denoising\": { \"p\": 0 }", "\"ShuffleIndices\": true",
          "{ \"Name\": \"Input0\", \"Kind\": \"Input\", \"Type\": \"FullyConnected\", \"N\": 10, "
          "\"Sparse\": false, \"DataSet\": \"x\", \"pDropout\": 0 }",
          "\"SparsenessPenalty\": { \"p\": 0, \"beta\": 0 }", "\"RELUSlope\": 1", "\"ELUAlpha\": 1",
          "\"SELULambda\": 1.050701",
          "{ \"Name\": \"Hidden1\", \"Kind\": \"Hidden\", \"Type\": \"FullyConnected\", \"N\": 4, "
          "\"Sparse\": false, \"Source\": [\"Input0\"], \"Activation\": \"Sigmoid\", "
          "\"pDropout\": 0, \"WeightInit\": { \"Scheme\": \"Xavier\", \"Scale\": 1, \"Bias\": 0 }, "
          "\"WeightNorm\": 0, \"DeltaNorm\": 0 }",
          "{ \"Name\": \"Output2\", \"Kind\": \"Output\", \"Type\": \"FullyConnected\", \"N\": 10, "
          "\"Sparse\": false, \"DataSet\": \"y\", \"Source\": [\"Hidden1\"], \"Activation\": "
          "\"Sigmoid\", \"WeightInit\": { \"Scheme\": \"Xavier\", \"Scale\": 1, \"Bias\": 0 }, "
          "\"WeightNorm\": 0, \"DeltaNorm\": 0 }"}) {
        EXPECT_CONTAINS(j, key);
    }
    expect_round_trip(net());
}

TEST(ConfigToJson, AutoNIsWrittenAsAuto) {
    NetworkConfig c = NetworkConfig::from_json(
        R"({ "Layers": [ { "N": "auto", "DataSet": "x" }, { "N": "auto", "DataSet": "y" } ] })");
    EXPECT_CONTAINS(c.to_json(), "\"N\": \"auto\"");
    expect_round_trip(c);
}

TEST(ConfigToJson, FloatsRoundTripExactly) {
    NetworkConfig c = NetworkConfig::from_json(net());
    c.version = 0.7 + 0.2;  // 0.8999999999999999
    const std::vector<float> values = {0.1f,        1.0f / 3.0f, 1e-7f,      FLT_MAX,
                                       FLT_MIN,     -10.2f,      0.0099999f, 16777217.0f,
                                       1.00000012f, -0.0f,       123456.789f};
    for (float v : values) {
        SCOPED_TRACE(v);
        c.smce.one_scale = std::fabs(v);
        c.smce.zero_scale = std::fabs(v);
        c.layers[1].weight_init.scheme = WeightInitScheme::kConstant;  // allows negative scales
        c.layers[1].weight_init.scale = v;
        c.layers[1].weight_init.bias = v;
        c.layers[2].weight_init.bias = -v;
        expect_round_trip(c);
    }
    c.layers[1].weight_init.bias = -0.0f;
    c.version = 0.7;
    expect_round_trip(c);
    EXPECT_TRUE(std::signbit(NetworkConfig::from_json(c.to_json()).layers[1].weight_init.bias));
    c.layers[1].p_dropout = std::nextafter(1.0f, 0.0f);
    c.denoising_p = 1e-30f;
    expect_round_trip(c);
    EXPECT_CONTAINS(NetworkConfig::from_json(net("", "", R"(, "pDropout": 0.37)")).to_json(),
                    "\"pDropout\": 0.37");
}

TEST(ConfigToJson, NamesWithSpecialCharactersAreEscaped) {
    NetworkConfig c = NetworkConfig::from_json(net());
    c.name = "quote \" backslash \\ tab \t newline \n bell \x07 unicode \xc3\xa9";
    c.layers[0].name = "in \"0\"";
    c.layers[0].dataset = "data\\set";
    c.layers[1].sources = {"in \"0\""};
    expect_round_trip(c);
}

TEST(ConfigToJson, ProgrammaticConfigRoundTrips) {
    NetworkConfig c;
    c.version = 0.95;
    c.name = "built";
    c.kind = NetworkKind::kAutoEncoder;
    c.error_function = ErrorFunction::kL2;
    c.shuffle_indices = false;
    LayerConfig in;
    in.name = "in";
    in.kind = LayerKind::kInput;
    in.n = 100;
    in.sparse = true;
    in.dataset = "d";
    in.p_dropout = 0.2f;
    LayerConfig out;
    out.name = "out";
    out.kind = LayerKind::kOutput;
    out.n_auto = true;
    out.dataset = "d";
    out.sources = {"in"};
    out.activation = Activation::kLinear;
    out.weight_init = {WeightInitScheme::kUniform, 0.05f, 0.25f};
    c.layers = {in, out};
    expect_round_trip(c);
}

// Configs derived from DSSTNE's samples and tests (only the implemented subset of the language).
TEST(ConfigToJson, DsstneDerivedExamplesRoundTrip) {
    const std::vector<std::string> examples = {
        // benchmarks/dsstne/config.json
        R"({ "Version" : 0.8, "Name" : "Network", "Kind" : "FeedForward", "ShuffleIndices" : false,
             "ScaledMarginalCrossEntropy" : { "oneTarget" : 1.0, "zeroTarget" : 0.0,
                                              "oneScale" : 1.0, "zeroScale" : 1.0 },
             "Layers" : [
               { "Name" : "Input", "Kind" : "Input", "N" : "auto", "DataSet" : "gl_input",
                 "Sparse" : true },
               { "Name" : "Hidden1", "Kind" : "Hidden", "Type" : "FullyConnected",
                 "Source" : "Input", "N" : 1024, "Activation" : "Sigmoid", "Sparse" : false,
                 "pDropout" : 0.5, "WeightInit" : { "Scheme" : "Gaussian", "Scale" : 0.01 } },
               { "Name" : "Hidden2", "Kind" : "Hidden", "Type" : "FullyConnected",
                 "Source" : ["Hidden1"], "N" : 1024, "Activation" : "Sigmoid", "Sparse" : false,
                 "pDropout" : 0.5, "WeightInit" : { "Scheme" : "Gaussian", "Scale" : 0.01 } },
               { "Name" : "Output", "Kind" : "Output", "Type" : "FullyConnected",
                 "DataSet" : "gl_output", "N" : "auto", "Activation" : "Sigmoid",
                 "Sparse" : true,
                 "WeightInit" : { "Scheme" : "Gaussian", "Scale" : 0.01, "Bias" : -10.2 } } ],
             "ErrorFunction" : "ScaledMarginalCrossEntropy" })",
        // samples/movielens/config.json
        R"({ "Version" : 0.7, "Name" : "AE", "Kind" : "FeedForward", "ShuffleIndices" : false,
             "SparsenessPenalty" : { "p" : 0.5, "beta" : 2.0 },
             "Denoising" : { "p" : 0.2 },
             "ScaledMarginalCrossEntropy" : { "oneTarget" : 1.0, "zeroTarget" : 0.0,
                                              "oneScale" : 1.0, "zeroScale" : 1.0 },
             "Layers" : [
               { "Name" : "Input", "Kind" : "Input", "N" : "auto", "DataSet" : "gl_input",
                 "Sparse" : true },
               { "Name" : "Hidden", "Kind" : "Hidden", "Type" : "FullyConnected", "N" : 128,
                 "Activation" : "Sigmoid", "Sparse" : true },
               { "Name" : "Output", "Kind" : "Output", "Type" : "FullyConnected",
                 "DataSet" : "gl_output", "N" : "auto", "Activation" : "Sigmoid",
                 "Sparse" : true } ],
             "ErrorFunction" : "ScaledMarginalCrossEntropy" })",
        // tst/test_data/validate_L2_02.json
        R"({ "Version" : 0.8, "Name" : "L2 1d regression", "Kind" : "FeedForward",
             "ShuffleIndices" : false,
             "Layers" : [
               { "Name" : "Input", "Kind" : "Input", "N" : 1, "DataSet" : "input",
                 "Sparse" : true },
               { "Name" : "Hidden", "Kind" : "Hidden", "Type" : "FullyConnected",
                 "Source" : "Input", "N" : 4, "Activation" : "Sigmoid", "Sparse" : true },
               { "Name" : "Output", "Kind" : "Output", "Type" : "FullyConnected",
                 "DataSet" : "output", "N" : 1, "Source" : ["Input"], "Activation" : "Linear",
                 "Sparse" : true } ],
             "ErrorFunction" : "L2" })",
        // tst/test_data/validate_ScaledMarginalCrossEntropy_02.json
        R"({ "Version" : 0.8, "Name" : "ScaledMarginalCrossEntropy", "Kind" : "FeedForward",
             "ShuffleIndices" : false,
             "ScaledMarginalCrossEntropy" : { "oneTarget" : 1.0, "zeroTarget" : 0.0,
                                              "oneScale" : 30.0, "zeroScale" : 1.0 },
             "Layers" : [
               { "Name" : "Input", "Kind" : "Input", "N" : 2, "DataSet" : "input",
                 "Sparse" : true },
               { "Name" : "Hidden", "Kind" : "Hidden", "Type" : "FullyConnected",
                 "Source" : "Input", "N" : 2, "Activation" : "Sigmoid", "Sparse" : true },
               { "Name" : "Output", "Kind" : "Output", "Type" : "FullyConnected",
                 "DataSet" : "output", "N" : 2, "Source" : ["Hidden"], "Activation" : "Sigmoid",
                 "Sparse" : true } ],
             "ErrorFunction" : "ScaledMarginalCrossEntropy" })",
        // "MovieLens Benchmark #2" (reference §2.8): 2 x 1536 ReLU, pDropout 0.5, Gaussian 0.01
        R"({ "Version" : 0.8, "Name" : "2 layer ReLu", "Kind" : "FeedForward",
             "ShuffleIndices" : false,
             "ScaledMarginalCrossEntropy" : { "oneTarget" : 1.0, "zeroTarget" : 0.0,
                                              "oneScale" : 1.0, "zeroScale" : 1.0 },
             "Layers" : [
               { "Name" : "Input", "Kind" : "Input", "N" : "auto", "DataSet" : "input",
                 "Sparse" : true },
               { "Name" : "Hidden1", "Kind" : "Hidden", "Type" : "FullyConnected",
                 "Source" : "Input", "N" : 1536, "Activation" : "Relu", "pDropout" : 0.5,
                 "WeightInit" : { "Scheme" : "Gaussian", "Scale" : 0.01 } },
               { "Name" : "Hidden2", "Kind" : "Hidden", "Type" : "FullyConnected",
                 "Source" : ["Hidden1"], "N" : 1536, "Activation" : "Relu", "pDropout" : 0.5,
                 "WeightInit" : { "Scheme" : "Gaussian", "Scale" : 0.01 } },
               { "Name" : "Output", "Kind" : "Output", "Type" : "FullyConnected",
                 "DataSet" : "output", "N" : "auto", "Activation" : "Sigmoid", "Sparse" : true,
                 "WeightInit" : { "Scheme" : "Gaussian", "Scale" : 0.01, "Bias" : -10.2 } } ],
             "ErrorFunction" : "ScaledMarginalCrossEntropy" })",
        // samples/cifar-10/config.json reduced to its fully connected tail
        R"({ "Version" : 0.81, "Name" : "CIFAR-100", "Kind" : "FeedForward",
             "Layers" : [
               { "Name" : "Input", "Kind" : "Input", "N" : "auto", "DataSet" : "input" },
               { "Kind" : "Hidden", "Type" : "FullyConnected", "N" : 1024, "Activation" : "Relu",
                 "pDropout" : 0.5 },
               { "Name" : "Output", "Kind" : "Output", "Type" : "FullyConnected", "N" : "auto",
                 "DataSet" : "output", "Activation" : "SoftMax",
                 "WeightInit" : { "Scheme" : "Gaussian", "Scale" : 0.01 , "Bias" : 0.0 } } ],
             "ErrorFunction" : "CrossEntropy" })",
    };
    for (const std::string& e : examples) expect_round_trip(e);

    NetworkConfig bench = NetworkConfig::from_json(examples[0]);
    EXPECT_EQ(bench.version, 0.8);
    EXPECT_EQ(bench.error_function, ErrorFunction::kScaledMarginalCrossEntropy);
    EXPECT_EQ(bench.smce.one_target, 1.0f);
    EXPECT_EQ(bench.smce.zero_target, 0.0f);
    EXPECT_EQ(bench.layers[3].weight_init.bias, -10.2f);
    EXPECT_EQ(bench.layers[2].sources, std::vector<std::string>{"Hidden1"});
    EXPECT_EQ(NetworkConfig::from_json(examples[5]).layers[1].name, "Hidden1");
}

}  // namespace
}  // namespace sparsenet
