// The topology keys of the network language: Skip and SharedWeights parsed (string or array,
// object or array, case-insensitive keys), written back by to_json, and every structural mistake
// reported with its JSON path (unknown or repeated names, cycles through skips, shared edges
// that do not exist, chains, InputLayer not a source); FixedWeights likewise (its source an
// Input layer among the layer's sources, not shared either way).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

#define EXPECT_CONTAINS(haystack, needle)                            \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
        << "  message: " << (haystack) << "\n  does not contain: " << (needle)

// In (x, 6) -> H1 (4) -> H2 (4) -> Out (y, 6); `h1`, `h2`, `out` are added to those layers
// (starting with a comma when non-empty).
std::string net(const std::string& h1 = "", const std::string& h2 = "",
                const std::string& out = "") {
    return R"({ "Layers": [
        { "Name": "In", "Kind": "Input", "N": 6, "DataSet": "x" },
        { "Name": "H1", "Kind": "Hidden", "N": 4)" +
           h1 + R"( },
        { "Name": "H2", "Kind": "Hidden", "N": 4)" +
           h2 + R"( },
        { "Name": "Out", "Kind": "Output", "N": 6, "DataSet": "y")" +
           out + " } ] }";
}

void expect_config_error(const std::string& json, const std::vector<std::string>& parts) {
    SCOPED_TRACE(json);
    try {
        NetworkConfig::from_json(json, "net.json");
        FAIL() << "no error thrown";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kConfig) << e.what();
        EXPECT_CONTAINS(e.what(), "net.json: ");
        EXPECT_CONTAINS(e.what(), "; expected ");
        for (const std::string& p : parts) EXPECT_CONTAINS(e.what(), p);
    }
}

void expect_round_trip(const NetworkConfig& c) {
    const std::string json = c.to_json();
    SCOPED_TRACE(json);
    const NetworkConfig back = NetworkConfig::from_json(json, "<to_json>");
    EXPECT_TRUE(back == c);
    EXPECT_EQ(back.to_json(), json);
}

const char* const kTie = R"(, "SharedWeights": { "InputLayer": "H1", "SourceInputLayer": "H1",
                                                "SourceOutputLayer": "H2" })";

// ---------------------------------------------------------------- accepted

TEST(ConfigTopology, SkipTakesANameOrAnArray) {
    NetworkConfig c = NetworkConfig::from_json(net("", R"(, "Skip": "H1")"));
    EXPECT_EQ(c.layers[2].skips, std::vector<std::string>{"H1"});
    EXPECT_TRUE(c.layers[1].skips.empty());
    c = NetworkConfig::from_json(net("", "", R"(, "Source": "H1", "sKiP": ["H1"])"));
    EXPECT_EQ(c.layers[3].skips, std::vector<std::string>{"H1"});
    expect_round_trip(c);
    EXPECT_CONTAINS(c.to_json(), R"("Source": ["H1"], "Skip": ["H1"], "Activation")");
    // Absent: not written.
    EXPECT_EQ(NetworkConfig::from_json(net()).to_json().find("Skip"), std::string::npos);
}

TEST(ConfigTopology, SharedWeightsTakesAnObjectOrAnArray) {
    const std::string tied_decoder = R"(, "Source": "H2", "SharedWeights": [
        { "InputLayer": "H2", "SourceInputLayer": "In", "SourceOutputLayer": "H1",
          "Transposed": true } ])";
    // H2 -> Out would need a 4 x 6 matrix: In -> H1 (6 x 4) transposed. (Sizes are the
    // engine's check; the parser checks names.)
    NetworkConfig c = NetworkConfig::from_json(net("", "", tied_decoder));
    ASSERT_EQ(c.layers[3].shared_weights.size(), 1u);
    const SharedWeights& s = c.layers[3].shared_weights[0];
    EXPECT_EQ(s.input_layer, "H2");
    EXPECT_EQ(s.source_input_layer, "In");
    EXPECT_EQ(s.source_output_layer, "H1");
    EXPECT_TRUE(s.transposed);
    expect_round_trip(c);
    EXPECT_CONTAINS(c.to_json(),
                    R"("SharedWeights": [{ "InputLayer": "H2", "SourceInputLayer": "In", )"
                    R"("SourceOutputLayer": "H1", "Transposed": true }])");

    // One object; keys case-insensitive; Transposed false by default.
    c = NetworkConfig::from_json(net("", R"(, "sharedweights": { "inputlayer": "H1",
        "SOURCEINPUTLAYER": "In", "sourceOutputLayer": "H1" }, "Source": "H1")"));
    ASSERT_EQ(c.layers[2].shared_weights.size(), 1u);
    EXPECT_FALSE(c.layers[2].shared_weights[0].transposed);
    EXPECT_EQ(c.layers[2].shared_weights[0].source_input_layer, "In");
    expect_round_trip(c);
    EXPECT_EQ(NetworkConfig::from_json(net()).to_json().find("SharedWeights"), std::string::npos);
    // Equality sees the tie.
    NetworkConfig d = c;
    d.layers[2].shared_weights[0].transposed = true;
    EXPECT_FALSE(d == c);
}

TEST(ConfigTopology, SeveralEntriesOnePerSource) {
    // Out <- [H1, H2]: H1's edge shares H1 -> H2, H2's edge shares In -> H1 transposed.
    const NetworkConfig c = NetworkConfig::from_json(net("", "", R"(, "Source": ["H1", "H2"],
        "SharedWeights": [
            { "InputLayer": "H1", "SourceInputLayer": "H1", "SourceOutputLayer": "H2" },
            { "InputLayer": "H2", "SourceInputLayer": "In", "SourceOutputLayer": "H1",
              "Transposed": true } ])"));
    EXPECT_EQ(c.layers[3].shared_weights.size(), 2u);
    expect_round_trip(c);
}

// ---------------------------------------------------------------- Skip errors

TEST(ConfigTopology, SkipErrorsNameThePath) {
    expect_config_error(
        R"({ "Layers": [ { "N": 4, "DataSet": "x", "Skip": "Output1" }, { "N": 4, "DataSet": "y" } ] })",
        {"$.Layers[0].Skip: Skip is not allowed on Input layers"});
    expect_config_error(net("", R"(, "Skip": "Nope")"),
                        {"$.Layers[2].Skip: unknown layer \"Nope\"", "one of In, H1, H2, Out"});
    expect_config_error(net("", R"(, "Skip": ["H1", "h1"])"),
                        {"$.Layers[2].Skip[1]: unknown layer \"h1\"", "did you mean \"H1\"?"});
    expect_config_error(
        net("", R"(, "Skip": ["H1", "H1"])"),
        {"$.Layers[2].Skip[1]: layer \"H1\" is listed twice", "each skip at most once"});
    expect_config_error(net("", R"(, "Skip": [])"), {"$.Layers[2].Skip: empty array"});
    expect_config_error(net("", R"(, "Skip": 3)"),
                        {"$.Layers[2].Skip: wrong type: found integer 3"});
    expect_config_error(net("", R"(, "Skip": [""])"), {"$.Layers[2].Skip[0]: empty string"});
    // A skip needs the skipped layer first: a cycle through a skip is a cycle.
    expect_config_error(net(R"(, "Skip": "H2")"),
                        {"the layer graph has a cycle", "Source or Skip of A"});
    expect_config_error(net("", R"(, "Skip": "H2")"),
                        {"$.Layers[2].Skip: the layer graph has a cycle: \"H2\" <- \"H2\""});
}

// ---------------------------------------------------------------- SharedWeights errors

TEST(ConfigTopology, SharedWeightsEntryErrors) {
    expect_config_error(net("", R"(, "SharedWeights": { "SourceInputLayer": "H1",
                                    "SourceOutputLayer": "H2" })"),
                        {"$.Layers[2].SharedWeights.InputLayer: missing required key InputLayer"});
    expect_config_error(net("", R"(, "SharedWeights": [{ "InputLayer": "H1",
                                    "SourceInputLayer": "In" }])"),
                        {"$.Layers[2].SharedWeights[0].SourceOutputLayer: missing required key"});
    // DSSTNE's LDL text spells it "Transpose" once; only "Transposed" parses (as in DSSTNE).
    expect_config_error(net("", R"(, "SharedWeights": { "InputLayer": "H1",
                                    "SourceInputLayer": "In", "SourceOutputLayer": "H1",
                                    "Transpose": true })"),
                        {"$.Layers[2].SharedWeights.Transpose: unknown key \"Transpose\"",
                         "InputLayer, SourceInputLayer, SourceOutputLayer, Transposed"});
    expect_config_error(net("", R"(, "SharedWeights": { "InputLayer": "H1",
                                    "SourceInputLayer": "In", "SourceOutputLayer": "H1",
                                    "Transposed": "yes" })"),
                        {"$.Layers[2].SharedWeights.Transposed: wrong type"});
    expect_config_error(net("", R"(, "SharedWeights": [])"),
                        {"$.Layers[2].SharedWeights: empty array"});
    expect_config_error(net("", R"(, "SharedWeights": ["H1"])"),
                        {"$.Layers[2].SharedWeights[0]: wrong type: found string \"H1\""});
    expect_config_error(
        R"({ "Layers": [ { "N": 4, "DataSet": "x", "SharedWeights": {} }, { "N": 4, "DataSet": "y" } ] })",
        {"$.Layers[0].SharedWeights: SharedWeights is not allowed on Input layers"});
}

TEST(ConfigTopology, SharedWeightsMustNameEdgesThatOwnTheirMatrix) {
    // InputLayer must be a Source of this layer.
    expect_config_error(net("", R"(, "SharedWeights": { "InputLayer": "In",
                                    "SourceInputLayer": "In", "SourceOutputLayer": "H1" })"),
                        {"$.Layers[2].SharedWeights.InputLayer: layer \"In\" is not a Source of "
                         "layer \"H2\"",
                         "one of this layer's sources: H1"});
    // At most one entry per source.
    expect_config_error(net("", R"(, "SharedWeights": [
            { "InputLayer": "H1", "SourceInputLayer": "In", "SourceOutputLayer": "H1" },
            { "InputLayer": "H1", "SourceInputLayer": "H1", "SourceOutputLayer": "Out" }])"),
                        {"$.Layers[2].SharedWeights[1].InputLayer: the edge from \"H1\" is shared "
                         "twice"});
    // Unknown layers, with the case hint.
    expect_config_error(net("", R"(, "SharedWeights": { "InputLayer": "H1",
                                    "SourceInputLayer": "in", "SourceOutputLayer": "H1" })"),
                        {"$.Layers[2].SharedWeights.SourceInputLayer: unknown layer \"in\"",
                         "did you mean \"In\"?"});
    // The owner edge must exist.
    expect_config_error(net("", R"(, "SharedWeights": { "InputLayer": "H1",
                                    "SourceInputLayer": "In", "SourceOutputLayer": "Out" })"),
                        {"$.Layers[2].SharedWeights: there is no weight matrix \"In\" -> \"Out\"",
                         "\"In\" is not a Source of \"Out\""});
    // Not its own matrix.
    expect_config_error(net("", R"(, "SharedWeights": { "InputLayer": "H1",
                                    "SourceInputLayer": "H1", "SourceOutputLayer": "H2" })"),
                        {"the edge \"H1\" -> \"H2\" shares its own matrix"});
    // No chains: H2's edge shares In -> H1, and Out's edge shares H1 -> H2 (itself shared).
    expect_config_error(net("", R"(, "SharedWeights": { "InputLayer": "H1",
                                    "SourceInputLayer": "In", "SourceOutputLayer": "H1",
                                    "Transposed": true })",
                            R"(, "SharedWeights": { "InputLayer": "H2",
                                    "SourceInputLayer": "H1", "SourceOutputLayer": "H2" })"),
                        {"$.Layers[3].SharedWeights: the edge \"H1\" -> \"H2\" uses a shared "
                         "matrix itself (chains of shared weights are not allowed, as in DSSTNE)"});
}

TEST(ConfigTopology, UntransposedTieBetweenSiblingLayers) {
    // Out <- H1 uses the matrix of H1 -> H2 (both 4 x ...; sizes are the engine's check).
    const NetworkConfig c =
        NetworkConfig::from_json(net("", "", R"(, "Source": "H1")" + std::string(kTie)));
    ASSERT_EQ(c.layers[3].shared_weights.size(), 1u);
    EXPECT_EQ(c.layers[3].shared_weights[0].source_output_layer, "H2");
    expect_round_trip(c);
}

// ---------------------------------------------------------------- FixedWeights

// Out <- [H2, In], the In -> Out edge fixed: `entry` is the FixedWeights value.
std::string fixed(const std::string& entry) {
    return net("", "", R"(, "Source": ["H2", "In"], "FixedWeights": )" + entry);
}

TEST(ConfigTopology, FixedWeightsTakesAnObjectOrAnArrayWithDefaults) {
    NetworkConfig c = NetworkConfig::from_json(fixed(R"({ "Source": "In", "Lambda": 500 })"));
    ASSERT_EQ(c.layers[3].fixed_weights.size(), 1u);
    const FixedWeights& f = c.layers[3].fixed_weights[0];
    EXPECT_EQ(f.source, "In");
    EXPECT_EQ(f.fit, LinearFit::kEase);
    EXPECT_EQ(f.lambda, 500.0f);
    EXPECT_EQ(f.scale, 1.0f);
    EXPECT_TRUE(f.in_training);
    expect_round_trip(c);
    EXPECT_CONTAINS(c.to_json(), R"("FixedWeights": [{ "Source": "In", "Fit": "EASE", )"
                                 R"("Lambda": 5e+02, "Scale": 1, "InTraining": true }])");
    c = NetworkConfig::from_json(fixed(
        R"([{ "source": "In", "FIT": "ease", "Lambda": 0.5, "Scale": -2, "InTraining": false }])"));
    EXPECT_EQ(c.layers[3].fixed_weights[0].scale, -2.0f);
    EXPECT_FALSE(c.layers[3].fixed_weights[0].in_training);
    EXPECT_FALSE(c.layers[3].fixed_weights[0].indicator);
    expect_round_trip(c);
    // Indicator: written only when set, so earlier model files' JSON is unchanged.
    EXPECT_EQ(c.to_json().find("Indicator"), std::string::npos);
    c = NetworkConfig::from_json(fixed(R"({ "Source": "In", "Lambda": 5, "Indicator": true })"));
    EXPECT_TRUE(c.layers[3].fixed_weights[0].indicator);
    expect_round_trip(c);
    EXPECT_CONTAINS(c.to_json(), R"("InTraining": true, "Indicator": true }])");
    expect_config_error(fixed(R"({ "Source": "In", "Lambda": 5, "Indicator": 1 })"),
                        {"$.Layers[3].FixedWeights.Indicator:"});
    // PopularityExponent: either fit, in [0, 2], written only when set.
    EXPECT_EQ(c.to_json().find("PopularityExponent"), std::string::npos);
    c = NetworkConfig::from_json(
        fixed(R"({ "Source": "In", "Fit": "GraphFilter", "PopularityExponent": 0.25 })"));
    EXPECT_EQ(c.layers[3].fixed_weights[0].popularity_exponent, 0.25f);
    EXPECT_CONTAINS(c.to_json(), R"("PopularityExponent": 0.25 }])");
    expect_round_trip(c);
    c = NetworkConfig::from_json(
        fixed(R"({ "Source": "In", "Lambda": 5, "PopularityExponent": 1 })"));
    EXPECT_EQ(c.layers[3].fixed_weights[0].popularity_exponent, 1.0f);
    expect_config_error(fixed(R"({ "Source": "In", "Lambda": 5, "PopularityExponent": 2.5 })"),
                        {"$.Layers[3].FixedWeights.PopularityExponent:", "[0, 2]"});
    expect_config_error(fixed(R"({ "Source": "In", "Lambda": 5, "PopularityExponent": -0.1 })"),
                        {"$.Layers[3].FixedWeights.PopularityExponent:"});
    c = NetworkConfig::from_json(fixed(
        R"([{ "source": "In", "FIT": "ease", "Lambda": 0.5, "Scale": -2, "InTraining": false }])"));
    EXPECT_EQ(NetworkConfig::from_json(net()).to_json().find("FixedWeights"), std::string::npos);
    NetworkConfig d = c;
    d.layers[3].fixed_weights[0].in_training = true;
    EXPECT_FALSE(d == c);
}

TEST(ConfigTopology, GraphFilterFixedWeightsHaveTheirOwnKeys) {
    NetworkConfig c =
        NetworkConfig::from_json(fixed(R"({ "Source": "In", "Fit": "GraphFilter" })"));
    const FixedWeights& f = c.layers[3].fixed_weights[0];
    EXPECT_EQ(f.fit, LinearFit::kGraphFilter);
    EXPECT_EQ(f.k, 0u);
    EXPECT_EQ(f.ideal_weight, 0.0f);
    EXPECT_EQ(f.user_exponent, 0.5f);
    EXPECT_EQ(f.item_exponent, 0.5f);
    expect_round_trip(c);
    c = NetworkConfig::from_json(
        fixed(R"({ "Source": "In", "Fit": "graphfilter", "K": 256, "IdealWeight": 0.3,
                   "UserExponent": 0.25, "ItemExponent": 1, "Scale": 4 })"));
    EXPECT_EQ(c.layers[3].fixed_weights[0].k, 256u);
    EXPECT_EQ(c.layers[3].fixed_weights[0].ideal_weight, 0.3f);
    EXPECT_EQ(c.layers[3].fixed_weights[0].item_exponent, 1.0f);
    expect_round_trip(c);
    EXPECT_CONTAINS(c.to_json(), R"("Fit": "GraphFilter", "K": 256, "IdealWeight": 0.3, )"
                                 R"("UserExponent": 0.25, "ItemExponent": 1, "Scale": 4)");
    NetworkConfig d = c;
    d.layers[3].fixed_weights[0].k = 128;
    EXPECT_FALSE(d == c);

    const std::string gf = R"("Source": "In", "Fit": "GraphFilter", )";
    expect_config_error(fixed("{ " + gf + R"("Lambda": 5 })"),
                        {"$.Layers[3].FixedWeights.Lambda: Lambda is not a key of Fit GraphFilter",
                         "K, IdealWeight, UserExponent, ItemExponent"});
    expect_config_error(fixed(R"({ "Source": "In", "Lambda": 5, "K": 4 })"),
                        {"$.Layers[3].FixedWeights.K: K is not a key of Fit EASE"});
    expect_config_error(fixed("{ " + gf + R"("K": -1 })"), {"$.Layers[3].FixedWeights.K:"});
    expect_config_error(fixed("{ " + gf + R"("K": 2.5 })"), {"$.Layers[3].FixedWeights.K:"});
    expect_config_error(
        fixed("{ " + gf + R"("IdealWeight": -0.1, "K": 3 })"),
        {"$.Layers[3].FixedWeights.IdealWeight: value -0.1 is out of range", "a number >= 0"});
    expect_config_error(
        fixed("{ " + gf + R"("UserExponent": 1.5 })"),
        {"$.Layers[3].FixedWeights.UserExponent: value 1.5 is out of range", "a number in [0, 1]"});
    expect_config_error(fixed("{ " + gf + R"("ItemExponent": "half" })"),
                        {"$.Layers[3].FixedWeights.ItemExponent:"});
    expect_config_error(fixed("{ " + gf + R"("IdealWeight": 0.3 })"),
                        {"$.Layers[3].FixedWeights.K: IdealWeight > 0 needs K"});
}

TEST(ConfigTopology, FixedWeightsErrorsNameThePath) {
    expect_config_error(fixed(R"({ "Lambda": 1 })"),
                        {"$.Layers[3].FixedWeights.Source: missing required key Source"});
    expect_config_error(
        fixed(R"({ "Source": "In" })"),
        {"$.Layers[3].FixedWeights.Lambda: missing required key Lambda", "a number > 0"});
    expect_config_error(fixed(R"({ "Source": "In", "Lambda": 0 })"),
                        {"$.Layers[3].FixedWeights.Lambda: value 0 is out of range"});
    expect_config_error(
        fixed(R"({ "Source": "In", "Lambda": 1, "Fit": "SLIM" })"),
        {"$.Layers[3].FixedWeights.Fit: unknown value \"SLIM\"", "EASE or GraphFilter"});
    expect_config_error(fixed(R"({ "Source": "In", "Lambda": 1, "Scal": 2 })"),
                        {"$.Layers[3].FixedWeights.Scal: unknown key \"Scal\"",
                         "Source, Fit, Lambda, Scale, InTraining, K, IdealWeight, UserExponent, "
                         "ItemExponent"});
    expect_config_error(fixed(R"([])"), {"$.Layers[3].FixedWeights: empty array"});
    expect_config_error(fixed(R"({ "Source": "H1", "Lambda": 1 })"),
                        {"$.Layers[3].FixedWeights.Source: layer \"H1\" is not a Source of "
                         "layer \"Out\"",
                         "one of this layer's sources: H2, In"});
    expect_config_error(fixed(R"({ "Source": "H2", "Lambda": 1 })"),
                        {"$.Layers[3].FixedWeights.Source: layer \"H2\" is not an Input layer"});
    // Entries of one source are summed into one matrix: they agree on InTraining.
    EXPECT_NO_THROW(NetworkConfig::from_json(
        fixed(R"([{ "Source": "In", "Lambda": 1 }, { "Source": "In", "Lambda": 2 }])")));
    expect_config_error(
        fixed(R"([{ "Source": "In", "Lambda": 1 },
                  { "Source": "In", "Fit": "GraphFilter", "InTraining": false }])"),
        {"$.Layers[3].FixedWeights[1].InTraining: the edge from \"In\" has InTraining true at "
         "$.Layers[3].FixedWeights[0]",
         "the same InTraining in every entry of one source"});
    expect_config_error(
        net("", "", R"(, "Source": ["H2", "In"], "FixedWeights": { "Source": "In", "Lambda": 1 },
            "SharedWeights": { "InputLayer": "In", "SourceInputLayer": "In",
                               "SourceOutputLayer": "H1" })"),
        {"$.Layers[3].FixedWeights.Source: the edge \"In\" -> \"Out\" also has a SharedWeights "
         "entry"});
    // H1 <- In fixed, and H2 <- In uses that matrix.
    expect_config_error(
        net(R"(, "FixedWeights": { "Source": "In", "Lambda": 1 })",
            R"(, "Source": ["H1", "In"], "SharedWeights": { "InputLayer": "In",
                "SourceInputLayer": "In", "SourceOutputLayer": "H1" })"),
        {"$.Layers[1].FixedWeights.Source: the edge \"In\" -> \"H1\" lends its matrix to layer "
         "\"H2\""});
    expect_config_error(
        R"({ "Layers": [ { "N": 4, "DataSet": "x", "FixedWeights": {} }, { "N": 4, "DataSet": "y" } ] })",
        {"$.Layers[0].FixedWeights: FixedWeights is not allowed on Input layers"});
}

// ---------------------------------------------------------------- configs built in code

// NetworkConfig::validate: a config edited in code meets from_json's rules, with its messages
// (the engine calls it before building; the rules are written once, in the parser).
TEST(ConfigTopology, ValidateAppliesTheParsersRulesToAConfigEditedInCode) {
    NetworkConfig c = NetworkConfig::from_json(net());
    EXPECT_NO_THROW(c.validate());
    c.layers[1].sources.push_back("H2");  // H1 <- H2 <- H1: a cycle
    try {
        c.validate();
        FAIL() << "no error thrown";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kConfig) << e.what();
        EXPECT_CONTAINS(e.what(), "the layer graph has a cycle: \"H1\" <- \"H2\" <- \"H1\"");
    }
    c = NetworkConfig::from_json(net());
    c.layers[3].shared_weights.push_back({"H2", "In", "Nope", false});
    try {
        c.validate();
        FAIL() << "no error thrown";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kConfig) << e.what();
        EXPECT_CONTAINS(e.what(), "SourceOutputLayer: unknown layer \"Nope\"");
    }
}

}  // namespace
}  // namespace sparsenet
