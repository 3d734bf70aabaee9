// The Training section and Decay in the network language: parsing with case-insensitive keys
// and values, defaults, range errors naming the JSON path, and canonical JSON round trips.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

std::string net(const std::string& top) {
    return R"({ )" + top + R"( "Layers": [
        { "N": 10, "DataSet": "x", "Sparse": true }, { "N": 4 }, { "N": 10, "DataSet": "y" } ] })";
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

#define EXPECT_CONTAINS(haystack, needle) \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(ConfigTraining, AbsentSectionAndDecayKeepTheDefaults) {
    const NetworkConfig c = NetworkConfig::from_json(net(""));
    EXPECT_FALSE(c.training.has_value());
    EXPECT_EQ(c.decay, 0.0f);
}

TEST(ConfigTraining, EveryKeyIsRead) {
    const NetworkConfig c = NetworkConfig::from_json(net(R"(
        "Decay": 0.002,
        "training": { "OPTIMIZER": "rmsprop", "alpha": 0.01, "MU": 0.95, "Mu1": 0.9,
                      "Epsilon": 1e-6, "Lambda": 0.0001, "Lambda1": 2e-5, "Epochs": 12.0,
                      "BatchSize": 256, "Seed": 18446744073709551615, "SparseUpdates": "LAZY" },)"));
    EXPECT_EQ(c.decay, 0.002f);
    ASSERT_TRUE(c.training.has_value());
    const TrainingConfig& t = *c.training;
    EXPECT_EQ(t.optimizer.kind, OptimizerKind::kRmsProp);
    EXPECT_EQ(t.optimizer.learning_rate, 0.01f);
    EXPECT_EQ(t.optimizer.mu, 0.95f);
    EXPECT_EQ(t.optimizer.mu1, 0.9f);
    EXPECT_EQ(t.optimizer.epsilon, std::optional<float>(1e-6f));
    EXPECT_EQ(t.optimizer.l2, 0.0001f);
    EXPECT_EQ(t.optimizer.l1, 2e-5f);
    EXPECT_EQ(t.optimizer.sparse_update, SparseUpdate::kLazy);
    EXPECT_EQ(t.epochs, 12u);
    EXPECT_EQ(t.batch, 256u);
    EXPECT_EQ(t.seed, 18446744073709551615ull);
}

TEST(ConfigTraining, AnEmptySectionMeansTheDefaults) {
    const NetworkConfig c = NetworkConfig::from_json(net(R"("Training": {},)"));
    ASSERT_TRUE(c.training.has_value());
    EXPECT_EQ(*c.training, TrainingConfig{});
    EXPECT_EQ(c.training->optimizer.kind, OptimizerKind::kSgd);
    EXPECT_EQ(c.training->optimizer.learning_rate, 0.025f);
    EXPECT_EQ(c.training->optimizer.mu, 0.9f);
    EXPECT_EQ(c.training->optimizer.mu1, 0.999f);
    EXPECT_FALSE(c.training->optimizer.epsilon.has_value());
    EXPECT_EQ(c.training->epochs, 40u);
    EXPECT_EQ(c.training->batch, 1024u);
    EXPECT_EQ(c.training->seed, 12134u);
}

TEST(ConfigTraining, EveryOptimizerNameParses) {
    const std::vector<std::pair<std::string, OptimizerKind>> names = {
        {"SGD", OptimizerKind::kSgd},           {"Momentum", OptimizerKind::kMomentum},
        {"Nesterov", OptimizerKind::kNesterov}, {"AdaGrad", OptimizerKind::kAdaGrad},
        {"RMSProp", OptimizerKind::kRmsProp},   {"AdaDelta", OptimizerKind::kAdaDelta},
        {"Adam", OptimizerKind::kAdam},         {"AdamW", OptimizerKind::kAdamW}};
    for (const auto& [name, kind] : names) {
        const NetworkConfig c =
            NetworkConfig::from_json(net(R"("Training": { "Optimizer": ")" + name + R"(" },)"));
        EXPECT_EQ(c.training->optimizer.kind, kind) << name;
        // The CLI spelling is the lower-case name.
        EXPECT_EQ(optimizer_from_string(name), kind);
    }
}

TEST(ConfigTraining, BadValuesNameThePathAndTheRange) {
    struct Bad {
        std::string top, path, what;
    };
    const std::vector<Bad> bad = {
        {R"("Decay": -0.1,)", "$.Decay", "value -0.1 is out of range; expected a number >= 0"},
        {R"("Decay": "fast",)", "$.Decay", "wrong type"},
        {R"("Training": { "Optimizer": "Adamax" },)", "$.Training.Optimizer",
         "unknown value \"Adamax\"; expected one of SGD, Momentum, Nesterov, AdaGrad, RMSProp, "
         "AdaDelta, Adam, AdamW"},
        {R"("Training": { "Alpha": -1 },)", "$.Training.Alpha", "out of range"},
        {R"("Training": { "Mu": 1 },)", "$.Training.Mu", "expected a number in [0, 1)"},
        {R"("Training": { "Mu1": 1.5 },)", "$.Training.Mu1", "out of range"},
        {R"("Training": { "Mu1": 0.999999999 },)", "$.Training.Mu1", "rounds to 1"},
        {R"("Training": { "Epsilon": 0 },)", "$.Training.Epsilon", "expected a number > 0"},
        {R"("Training": { "Lambda": -0.5 },)", "$.Training.Lambda", "out of range"},
        {R"("Training": { "Lambda1": -0.5 },)", "$.Training.Lambda1", "out of range"},
        {R"("Training": { "Epochs": 2.5 },)", "$.Training.Epochs", "not an integer"},
        {R"("Training": { "Epochs": -1 },)", "$.Training.Epochs", "out of range"},
        {R"("Training": { "BatchSize": 0 },)", "$.Training.BatchSize", "out of range"},
        {R"("Training": { "BatchSize": 4294967296 },)", "$.Training.BatchSize", "out of range"},
        {R"("Training": { "Seed": "x" },)", "$.Training.Seed", "wrong type"},
        {R"("Training": { "SparseUpdates": "Eager" },)", "$.Training.SparseUpdates",
         "expected one of Exact, Lazy"},
        {R"("Training": { "Precision": "fp16" },)", "$.Training.Precision",
         "unknown value \"fp16\"; expected one of fp32, tf32, bf16"},
        {R"("Training": { "Precision": 16 },)", "$.Training.Precision", "wrong type"},
        {R"("Training": { "Optimiser": "Adam" },)", "$.Training.Optimiser",
         "unknown key \"Optimiser\"; expected one of the keys valid here: Optimizer, Alpha"},
        {R"("Training": { "Alpha": 0.1, "alpha": 0.2 },)", "$.Training", "differ only by case"},
        {R"("Training": [1],)", "$.Training", "wrong type"},
    };
    for (const Bad& b : bad) {
        const std::string msg = config_error(net(b.top));
        EXPECT_CONTAINS(msg, "net.json: " + b.path + ": ");
        EXPECT_CONTAINS(msg, b.what);
    }
}

TEST(ConfigTraining, CanonicalJsonRoundTrips) {
    const NetworkConfig c = NetworkConfig::from_json(net(R"(
        "Decay": 0.125,
        "Training": { "Optimizer": "Nesterov", "Alpha": 0.3, "Mu": 0.75, "Lambda1": 0.5,
                      "Epochs": 3, "Seed": 9007199254740993, "SparseUpdates": "Lazy" },)"));
    const std::string text = c.to_json();
    EXPECT_NE(text.find("\"Decay\": 0.125"), std::string::npos) << text;
    EXPECT_NE(text.find("\"Training\": { \"Optimizer\": \"Nesterov\", \"Alpha\": 0.3, \"Mu\": "
                        "0.75, \"Mu1\": 0.999, \"Lambda\": 0, \"Lambda1\": 0.5, \"Epochs\": 3, "
                        "\"BatchSize\": 1024, \"Seed\": 9007199254740993, \"SparseUpdates\": "
                        "\"Lazy\" }"),
              std::string::npos)
        << text;
    const NetworkConfig back = NetworkConfig::from_json(text);
    EXPECT_EQ(back, c);
    EXPECT_EQ(back.to_json(), text);

    // Epsilon is written when given, and equality sees every field.
    NetworkConfig e = c;
    e.training->optimizer.epsilon = 0.25f;
    EXPECT_FALSE(e == c);
    EXPECT_NE(e.to_json().find("\"Epsilon\": 0.25"), std::string::npos);
    EXPECT_EQ(NetworkConfig::from_json(e.to_json()), e);
    NetworkConfig d = c;
    d.decay = 0.5f;
    EXPECT_FALSE(d == c);
    NetworkConfig none = c;
    none.training.reset();
    EXPECT_FALSE(none == c);
    EXPECT_EQ(none.to_json().find("Training"), std::string::npos);
}

TEST(ConfigTraining, PrecisionIsReadAndWrittenOnlyWhenGiven) {
    EXPECT_FALSE(NetworkConfig::from_json(net(R"("Training": {},)")).training->precision);
    EXPECT_EQ(NetworkConfig::from_json(net(R"("Training": {},)")).to_json().find("Precision"),
              std::string::npos);
    for (const auto& [name, p] : std::vector<std::pair<std::string, Precision>>{
             {"fp32", Precision::kFp32}, {"TF32", Precision::kTf32}, {"bf16", Precision::kBf16}}) {
        const NetworkConfig c =
            NetworkConfig::from_json(net(R"("Training": { "Precision": ")" + name + R"(" },)"));
        EXPECT_EQ(c.training->precision, std::optional<Precision>(p)) << name;
        const std::string text = c.to_json();
        EXPECT_NE(text.find(std::string("\"Precision\": \"") + to_string(p) + "\""),
                  std::string::npos)
            << text;
        EXPECT_EQ(NetworkConfig::from_json(text), c);
        NetworkConfig other = c;
        other.training->precision.reset();
        EXPECT_FALSE(other == c);
    }
}

}  // namespace
}  // namespace sparsenet
