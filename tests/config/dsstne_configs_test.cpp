// DSSTNE's own network configs (reference copies in SPARSENET_DSSTNE_CONFIGS_DIR): each one either
// loads, or is rejected with kNotImplemented naming the first unimplemented key or value. Never a
// config error, never silently accepted with a feature dropped.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

namespace fs = std::filesystem;

// Expected outcome per file: "" means it loads; otherwise the exact
// "<json path>: not implemented yet: <what>" part of the kNotImplemented message.
const std::map<std::string, std::string> kExpected = {
    {"benchmarks_dsstne_config.json", ""},
    {"samples_cifar-10_config.json",
     "$.LocalResponseNormalization: not implemented yet: LocalResponseNormalization"},
    {"samples_movielens_config.json", ""},
    {"samples_network_config_1.json", ""},
    {"samples_network_config_2.json", ""},
    {"samples_network_config_3.json", ""},
    {"samples_network_config_4.json", ""},
    {"samples_network_config_5.json", ""},
    {"samples_network_config_6.json", ""},
    {"tst_test_data_validate_DataScaledMarginalCrossEntropy_02.json", ""},
    {"tst_test_data_validate_L2_01.json", ""},
    {"tst_test_data_validate_L2_02.json", ""},
    {"tst_test_data_validate_L2_LRelu_01.json", ""},
    {"tst_test_data_validate_L2_LRelu_02.json", ""},
    {"tst_test_data_validate_ScaledMarginalCrossEntropy_01.json", ""},
    {"tst_test_data_validate_ScaledMarginalCrossEntropy_02.json", ""},
};

std::vector<fs::path> config_files() {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(SPARSENET_DSSTNE_CONFIGS_DIR)) {
        if (entry.is_regular_file() && entry.path().extension() == ".json") {
            files.push_back(entry.path());
        }
    }
    std::sort(files.begin(), files.end());
    return files;
}

#define SKIP_WITHOUT_CONFIGS()                                                                 \
    if (!fs::is_directory(SPARSENET_DSSTNE_CONFIGS_DIR)) {                                     \
        GTEST_SKIP() << "DSSTNE reference configs not found in " SPARSENET_DSSTNE_CONFIGS_DIR; \
    }

TEST(DsstneConfigs, EachFileLoadsOrIsRejectedAsNotImplemented) {
    SKIP_WITHOUT_CONFIGS();
    const std::vector<fs::path> files = config_files();
    ASSERT_FALSE(files.empty());
    int loaded = 0, not_implemented = 0;
    for (const fs::path& file : files) {
        const std::string name = file.filename().string();
        SCOPED_TRACE(name);
        auto expected = kExpected.find(name);
        try {
            NetworkConfig c = NetworkConfig::from_file(file.string());
            ++loaded;
            EXPECT_FALSE(c.layers.empty());
            // What loads must survive the canonical JSON (as stored in model files).
            EXPECT_TRUE(NetworkConfig::from_json(c.to_json(), "<to_json>") == c) << c.to_json();
            if (expected == kExpected.end()) {
                ADD_FAILURE() << "new reference config loads; add it to kExpected";
            } else {
                EXPECT_EQ(expected->second, "") << "loaded, but expected: " << expected->second;
            }
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(e.category(), ErrorCategory::kNotImplemented) << msg;
            EXPECT_NE(msg.find("not implemented yet: "), std::string::npos) << msg;
            EXPECT_EQ(msg.rfind(file.string() + ": ", 0), 0u) << "message names the file: " << msg;
            ++not_implemented;
            if (expected == kExpected.end()) {
                ADD_FAILURE() << "new reference config rejected: " << msg
                              << "; add it to kExpected";
            } else {
                EXPECT_NE(expected->second, "") << "expected to load, got: " << msg;
                EXPECT_EQ(msg, file.string() + ": " + expected->second);
            }
        }
    }
    std::cout << "[ info     ] " << loaded << " DSSTNE configs load, " << not_implemented
              << " are rejected as not implemented yet\n";
}

TEST(DsstneConfigs, EveryExpectedFileIsPresent) {
    SKIP_WITHOUT_CONFIGS();
    for (const auto& [name, outcome] : kExpected) {
        EXPECT_TRUE(fs::exists(fs::path(SPARSENET_DSSTNE_CONFIGS_DIR) / name)) << name;
    }
}

std::string path_of(const std::string& name) {
    return (fs::path(SPARSENET_DSSTNE_CONFIGS_DIR) / name).string();
}

TEST(DsstneConfigs, BenchmarkConfigValues) {
    SKIP_WITHOUT_CONFIGS();
    NetworkConfig c = NetworkConfig::from_file(path_of("benchmarks_dsstne_config.json"));
    EXPECT_EQ(c.version, 0.8);
    EXPECT_EQ(c.name, "Network");
    EXPECT_FALSE(c.shuffle_indices);
    EXPECT_EQ(c.error_function, ErrorFunction::kScaledMarginalCrossEntropy);
    EXPECT_EQ(c.smce.one_target, 1.0f);
    EXPECT_EQ(c.smce.zero_target, 0.0f);
    EXPECT_EQ(c.smce.one_scale, 1.0f);
    EXPECT_EQ(c.smce.zero_scale, 1.0f);
    ASSERT_EQ(c.layers.size(), 5u);
    EXPECT_EQ(c.layers[0].kind, LayerKind::kInput);
    EXPECT_TRUE(c.layers[0].n_auto);
    EXPECT_TRUE(c.layers[0].sparse);
    EXPECT_EQ(c.layers[0].dataset, "gl_input");
    for (int i = 1; i <= 3; ++i) {
        const LayerConfig& h = c.layers[i];
        EXPECT_EQ(h.name, "Hidden" + std::to_string(i));
        EXPECT_EQ(h.kind, LayerKind::kHidden);
        EXPECT_EQ(h.n, 1024u);
        EXPECT_EQ(h.activation, Activation::kSigmoid);
        EXPECT_EQ(h.p_dropout, 0.5f);
        EXPECT_EQ(h.weight_init.scheme, WeightInitScheme::kGaussian);
        EXPECT_EQ(h.weight_init.scale, 0.01f);
        EXPECT_EQ(h.sources, std::vector<std::string>{c.layers[i - 1].name});
    }
    const LayerConfig& out = c.layers[4];
    EXPECT_EQ(out.kind, LayerKind::kOutput);
    EXPECT_TRUE(out.n_auto);
    EXPECT_EQ(out.dataset, "gl_output");
    EXPECT_EQ(out.sources, std::vector<std::string>{"Hidden3"});
    EXPECT_EQ(out.weight_init.bias, -10.2f);
}

TEST(DsstneConfigs, TestDataConfigValues) {
    SKIP_WITHOUT_CONFIGS();
    NetworkConfig l2 = NetworkConfig::from_file(path_of("tst_test_data_validate_L2_02.json"));
    EXPECT_EQ(l2.error_function, ErrorFunction::kL2);
    ASSERT_EQ(l2.layers.size(), 3u);
    EXPECT_EQ(l2.layers[1].n, 4u);
    EXPECT_EQ(l2.layers[2].sources, std::vector<std::string>{"Input"});  // Hidden is dangling
    EXPECT_EQ(l2.layers[2].activation, Activation::kLinear);

    NetworkConfig smce = NetworkConfig::from_file(
        path_of("tst_test_data_validate_ScaledMarginalCrossEntropy_01.json"));
    EXPECT_EQ(smce.smce.one_scale, 30.0f);
    EXPECT_EQ(smce.layers[1].n, 2u);

    NetworkConfig relu = NetworkConfig::from_file(path_of("samples_network_config_4.json"));
    EXPECT_EQ(relu.layers[1].n, 1536u);
    EXPECT_EQ(relu.layers[1].activation, Activation::kRectifiedLinear);
}

// Configs that load since the whole activation / loss / regulariser language is implemented.
TEST(DsstneConfigs, LanguageConfigValues) {
    SKIP_WITHOUT_CONFIGS();
    NetworkConfig ml = NetworkConfig::from_file(path_of("samples_movielens_config.json"));
    EXPECT_EQ(ml.sparseness_penalty.p, 0.5f);
    EXPECT_EQ(ml.sparseness_penalty.beta, 2.0f);
    EXPECT_EQ(ml.denoising_p, 0.2f);
    const LayerConfig& hidden = ml.layers[1];
    EXPECT_TRUE(hidden.sparse);
    EXPECT_TRUE(hidden.has_sparseness_penalty());
    EXPECT_EQ(hidden.sparseness_penalty.p, 0.5f);
    EXPECT_EQ(hidden.sparseness_penalty.beta, 2.0f);
    EXPECT_FALSE(ml.layers[2].has_sparseness_penalty());  // Output layers are never penalised

    NetworkConfig five = NetworkConfig::from_file(path_of("samples_network_config_5.json"));
    EXPECT_EQ(five.denoising_p, 0.4f);
    EXPECT_EQ(five.smce.one_scale, 30.0f);
    EXPECT_TRUE(five.layers[1].has_sparseness_penalty());

    NetworkConfig dsmce = NetworkConfig::from_file(
        path_of("tst_test_data_validate_DataScaledMarginalCrossEntropy_02.json"));
    EXPECT_EQ(dsmce.error_function, ErrorFunction::kDataScaledMarginalCrossEntropy);
    // Its margins come from the DataScaledMarginalCrossEntropy object.
    EXPECT_EQ(dsmce.smce.one_target, 1.0f);
    EXPECT_EQ(dsmce.smce.zero_target, 0.0f);
    EXPECT_EQ(dsmce.smce.one_scale, 30.0f);
    EXPECT_EQ(dsmce.smce.zero_scale, 1.0f);

    for (const char* name :
         {"tst_test_data_validate_L2_LRelu_01.json", "tst_test_data_validate_L2_LRelu_02.json"}) {
        SCOPED_TRACE(name);
        NetworkConfig lrelu = NetworkConfig::from_file(path_of(name));
        EXPECT_EQ(lrelu.layers[1].activation, Activation::kLeakyRectifiedLinear);
        EXPECT_EQ(lrelu.activation_defaults.relu_slope, 1.0f);  // DSSTNE's default
    }
    EXPECT_EQ(NetworkConfig::from_file(path_of("tst_test_data_validate_L2_LRelu_01.json"))
                  .layers[1]
                  .relu_slope,
              0.0f);
    EXPECT_EQ(NetworkConfig::from_file(path_of("tst_test_data_validate_L2_LRelu_02.json"))
                  .layers[1]
                  .relu_slope,
              0.5f);
}

}  // namespace
}  // namespace sparsenet
