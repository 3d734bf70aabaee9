// The topology part of the network language end to end, against values computed here from the
// parameters: a tied autoencoder's encoder and decoder read one matrix before and after training
// steps, its step is the summed gradient of both uses, a saved and loaded model keeps the tie
// (stored once); skips are added before the activation; several sources are summed with one
// bias; several outputs sum their losses and are picked by name for prediction; the topology the
// engine does not run is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/model_file.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

NetworkOptions cpu_options(uint64_t seed = 7) {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = seed;
    return o;
}

using Matrix = std::vector<double>;  // row-major

Matrix dense(const Dataset& d) {
    Matrix m(d.rows * d.cols, 0.0);
    for (uint64_t r = 0; r < d.rows; ++r)
        for (uint64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e)
            m[r * d.cols + d.indices[e]] = d.values.empty() ? 1.0 : d.values[e];
    return m;
}

// c[rows, out] += a[rows, in] . w, with w [in, out] (or w [out, in] used transposed).
void add_product(const Matrix& a, size_t rows, size_t in, const std::vector<float>& w, size_t out,
                 bool transposed, Matrix& c) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < out; ++j) {
            double z = 0;
            for (size_t i = 0; i < in; ++i)
                z += a[r * in + i] * double(transposed ? w[j * in + i] : w[i * out + j]);
            c[r * out + j] += z;
        }
}

Matrix apply(Matrix z, size_t rows, size_t n, const std::vector<float>& bias,
             const std::function<double(double)>& f) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < n; ++j) z[r * n + j] = f(z[r * n + j] + bias[j]);
    return z;
}

double sigmoid(double z) {
    return 1.0 / (1.0 + std::exp(-z));
}

void expect_close(const std::vector<float>& got, const Matrix& want, double tol,
                  const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << "[" << i << "]";
    }
}

// ---------------------------------------------------------------- tied autoencoder

const char* const kTied = R"({
    "Name": "tied", "ErrorFunction": "ScaledMarginalCrossEntropy", "ShuffleIndices": false,
    "ScaledMarginalCrossEntropy": {"oneTarget": 1.0, "zeroTarget": 0.0},
    "Layers": [
        {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
        {"Name": "H", "Kind": "Hidden", "N": 5, "Activation": "Sigmoid",
         "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5}},
        {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "x", "Activation": "Sigmoid",
         "SharedWeights": {"InputLayer": "H", "SourceInputLayer": "In",
                           "SourceOutputLayer": "H", "Transposed": true}}
    ]})";

constexpr uint64_t kRows = 40;
constexpr uint32_t kItems = 12;

Dataset tied_data() {
    return testing::random_dataset(kRows, kItems, testing::RowShape::kPowerLaw, false, 11, "x");
}

// Encoder and decoder recomputed from the one stored matrix, against the engine's activations.
void expect_both_uses_read_one_matrix(Network& net, const Dataset& x) {
    const std::vector<float> w = net.get_parameter("weight:In->H");  // [12, 5]
    // The decoder's name means the same matrix, in its owner's layout.
    EXPECT_EQ(net.get_parameter("weight:H->Out"), w);
    const Matrix xd = dense(x);
    Matrix zh(kRows * 5, 0.0);
    add_product(xd, kRows, kItems, w, 5, false, zh);
    const Matrix h = apply(zh, kRows, 5, net.get_parameter("bias:H"), sigmoid);
    Matrix zo(kRows * kItems, 0.0);
    add_product(h, kRows, 5, w, kItems, true, zo);
    const Matrix o = apply(zo, kRows, kItems, net.get_parameter("bias:Out"), sigmoid);
    Predictor predictor(net, {{"x", &x}});
    expect_close(predictor.scores(0, kRows, "H"), h, 1e-5, "H");
    expect_close(predictor.scores(0, kRows), o, 1e-5, "Out");
}

TEST(TiedAutoencoder, OneParameterReadByBothUsesBeforeAndAfterSteps) {
    const Dataset x = tied_data();
    Network net = Network::create(NetworkConfig::from_json(kTied), {{"x", kItems}}, cpu_options());
    const std::vector<Parameter> params = net.parameters();
    ASSERT_EQ(params.size(), 3u);  // the matrix once, two biases
    EXPECT_EQ(params[0].name, "weight:In->H");
    EXPECT_EQ(params[0].rows, kItems);
    EXPECT_EQ(params[0].cols, 5u);
    expect_both_uses_read_one_matrix(net, x);

    TrainOptions to;
    to.batch = 8;
    to.epochs = 3;
    to.optimizer.kind = OptimizerKind::kAdam;
    to.optimizer.learning_rate = 0.05f;
    Trainer trainer(net, {{"x", &x}}, to);
    const std::vector<float> before = net.get_parameter("weight:In->H");
    const double loss0 = trainer.evaluate_loss();
    trainer.fit();
    EXPECT_NE(net.get_parameter("weight:In->H"), before);
    EXPECT_LT(trainer.evaluate_loss(), loss0);
    expect_both_uses_read_one_matrix(net, x);
}

TEST(TiedAutoencoder, OneStepAppliesTheSumOfBothUsesGradients) {
    const Dataset x = tied_data();
    Network net = Network::create(NetworkConfig::from_json(kTied), {{"x", kItems}}, cpu_options());
    TrainOptions to;
    to.batch = kRows;  // one batch, in order (ShuffleIndices false): the step of compute_gradients
    to.optimizer.learning_rate = 0.5f;
    Trainer trainer(net, {{"x", &x}}, to);
    const auto grads = trainer.compute_gradients(0, kRows);
    ASSERT_EQ(grads.size(), 3u);
    const std::vector<float>& g = grads.at("weight:In->H");

    // The gradient of each use alone, from an untied copy with the same matrices: encoder and
    // decoder gradients must add up to the tied one (DSSTNE would average them).
    const std::string untied_json = R"({
        "Name": "untied", "ErrorFunction": "ScaledMarginalCrossEntropy",
        "ScaledMarginalCrossEntropy": {"oneTarget": 1.0, "zeroTarget": 0.0},
        "Layers": [
            {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
            {"Name": "H", "Kind": "Hidden", "N": 5, "Activation": "Sigmoid"},
            {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "x",
             "Activation": "Sigmoid"}]})";
    Network untied =
        Network::create(NetworkConfig::from_json(untied_json), {{"x", kItems}}, cpu_options());
    const std::vector<float> w = net.get_parameter("weight:In->H");
    std::vector<float> wt(w.size());
    for (size_t i = 0; i < kItems; ++i)
        for (size_t j = 0; j < 5; ++j) wt[j * kItems + i] = w[i * 5 + j];
    untied.set_parameter("weight:In->H", w);
    untied.set_parameter("weight:H->Out", wt);
    untied.set_parameter("bias:H", net.get_parameter("bias:H"));
    untied.set_parameter("bias:Out", net.get_parameter("bias:Out"));
    Trainer untied_trainer(untied, {{"x", &x}}, to);
    const auto parts = untied_trainer.compute_gradients(0, kRows);
    const std::vector<float>& ge = parts.at("weight:In->H");   // [12, 5]
    const std::vector<float>& gd = parts.at("weight:H->Out");  // [5, 12]
    double decoder_norm = 0;
    for (size_t i = 0; i < kItems; ++i) {
        for (size_t j = 0; j < 5; ++j) {
            const double want = double(ge[i * 5 + j]) + double(gd[j * kItems + i]);
            decoder_norm += std::fabs(gd[j * kItems + i]);
            EXPECT_NEAR(g[i * 5 + j], want, 1e-6 + 1e-5 * std::fabs(want)) << i << "," << j;
        }
    }
    EXPECT_GT(decoder_norm, 1e-3);  // the decoder's share is not negligible

    // One SGD step on the whole data moves the matrix by -lr * (that sum).
    trainer.train_epoch();
    const std::vector<float> after = net.get_parameter("weight:In->H");
    for (size_t i = 0; i < w.size(); ++i) {
        const double want = double(w[i]) - 0.5 * double(g[i]);
        EXPECT_NEAR(after[i], want, 1e-6 + 1e-5 * std::fabs(want)) << i;
    }
}

TEST(TiedAutoencoder, SavedModelStoresTheMatrixOnceAndLoadingKeepsTheTie) {
    const Dataset x = tied_data();
    testing::TempDir dir;
    const std::string path = dir.file("tied.nc");
    Network net = Network::create(NetworkConfig::from_json(kTied), {{"x", kItems}}, cpu_options());
    TrainOptions to;
    to.batch = 8;
    to.epochs = 2;
    to.optimizer.learning_rate = 0.3f;
    {
        Trainer trainer(net, {{"x", &x}}, to);
        trainer.fit();
    }
    net.save(path);

    // DSSTNE's layout: both edges listed, the decoder as a shared, transposed edge without values.
    const io::ModelFile model = io::read_model(path);
    ASSERT_EQ(model.weights.size(), 2u);
    EXPECT_FALSE(model.weights[0].shared);
    EXPECT_EQ(model.weights[0].values, net.get_parameter("weight:In->H"));
    const io::ModelWeight& decoder = model.weights[1];
    EXPECT_EQ(decoder.input_layer, "H");
    EXPECT_EQ(decoder.output_layer, "Out");
    EXPECT_TRUE(decoder.shared);
    EXPECT_TRUE(decoder.transposed);
    EXPECT_EQ(decoder.source_input_layer, "In");
    EXPECT_EQ(decoder.source_output_layer, "H");
    EXPECT_TRUE(decoder.values.empty());
    EXPECT_EQ(decoder.rows, 5u);
    EXPECT_EQ(decoder.cols, kItems);

    Network loaded = Network::load(path, cpu_options());
    ASSERT_EQ(loaded.parameters().size(), 3u);
    for (const Parameter& p : net.parameters()) {
        EXPECT_EQ(loaded.get_parameter(p.name), net.get_parameter(p.name)) << p.name;
    }
    expect_both_uses_read_one_matrix(loaded, x);

    // The same steps on both keep them identical bit for bit: the loaded decoder still reads the
    // encoder's matrix (SGD has no state that the file would have to carry).
    for (Network* n : {&net, &loaded}) {
        Trainer trainer(*n, {{"x", &x}}, to);
        trainer.fit();
    }
    for (const Parameter& p : net.parameters()) {
        EXPECT_EQ(loaded.get_parameter(p.name), net.get_parameter(p.name)) << p.name;
    }
    expect_both_uses_read_one_matrix(loaded, x);

    // Writing the matrix through either name moves both uses.
    std::vector<float> zeros(size_t(kItems) * 5, 0.0f);
    loaded.set_parameter("weight:H->Out", zeros);
    EXPECT_EQ(loaded.get_parameter("weight:In->H"), zeros);
    Predictor predictor(loaded, {{"x", &x}});
    const std::vector<float> out = predictor.scores(0, 1);
    const std::vector<float> bias = loaded.get_parameter("bias:Out");
    for (size_t j = 0; j < kItems; ++j) EXPECT_NEAR(out[j], sigmoid(bias[j]), 1e-6);
}

TEST(TiedAutoencoder, ModelWhoseTieDisagreesWithItsConfigIsRefused) {
    const Dataset x = tied_data();
    testing::TempDir dir;
    const std::string path = dir.file("tied.nc");
    Network net = Network::create(NetworkConfig::from_json(kTied), {{"x", kItems}}, cpu_options());
    net.save(path);
    io::ModelFile model = io::read_model(path);
    model.weights[1].transposed = false;  // the config says transposed
    io::write_model(path, model);
    try {
        Network::load(path, cpu_options());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kIo);
        EXPECT_NE(std::string(e.what()).find("weight1 (H -> Out)"), std::string::npos) << e.what();
    }
}

TEST(TiedAutoencoder, TrainsWithDenoisingDropoutAndWeightNorm) {
    const Dataset x = tied_data();
    const char* json = R"({
        "ErrorFunction": "ScaledMarginalCrossEntropy", "Denoising": {"p": 0.2},
        "ScaledMarginalCrossEntropy": {"oneTarget": 1.0, "zeroTarget": 0.0},
        "Layers": [
            {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
            {"Name": "H", "Kind": "Hidden", "N": 5, "Activation": "Sigmoid", "pDropout": 0.3,
             "WeightNorm": 0.8, "WeightInit": {"Scheme": "Gaussian", "Scale": 0.5}},
            {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "x",
             "Activation": "Sigmoid", "WeightNorm": 0.5,
             "SharedWeights": {"InputLayer": "H", "SourceInputLayer": "In",
                               "SourceOutputLayer": "H", "Transposed": true}}
        ]})";
    Network net = Network::create(NetworkConfig::from_json(json), {{"x", kItems}}, cpu_options());
    TrainOptions to;
    to.batch = 8;
    to.epochs = 3;
    to.optimizer.learning_rate = 2.0f;  // large enough that both norms bind
    Trainer trainer(net, {{"x", &x}}, to);
    for (const EpochStats& s : trainer.fit()) EXPECT_TRUE(std::isfinite(s.loss));
    // Both bounds hold on the one matrix: columns (the encoder's units) <= 0.8, rows (the
    // decoder's units, the columns of the transpose) <= 0.5.
    const std::vector<float> w = net.get_parameter("weight:In->H");
    double largest_row = 0;
    for (size_t j = 0; j < 5; ++j) {
        double n2 = 0;
        for (size_t i = 0; i < kItems; ++i) n2 += double(w[i * 5 + j]) * w[i * 5 + j];
        EXPECT_LE(std::sqrt(n2), 0.8 * (1 + 1e-5)) << "column " << j;
    }
    for (size_t i = 0; i < kItems; ++i) {
        double n2 = 0;
        for (size_t j = 0; j < 5; ++j) n2 += double(w[i * 5 + j]) * w[i * 5 + j];
        EXPECT_LE(std::sqrt(n2), 0.5 * (1 + 1e-5)) << "row " << i;
        largest_row = std::max(largest_row, std::sqrt(n2));
    }
    EXPECT_GT(largest_row, 0.49);  // the decoder's bound was reached
    expect_both_uses_read_one_matrix(net, x);
}

// ---------------------------------------------------------------- skips and sources

TEST(Skip, AddedBeforeTheActivationWithSeveralSourcesAndOneBias) {
    const char* json = R"({
        "ErrorFunction": "L2",
        "Layers": [
            {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true},
            {"Name": "H1", "Kind": "Hidden", "N": 4, "Activation": "Tanh",
             "WeightInit": {"Scheme": "Gaussian", "Scale": 0.7, "Bias": 0.2}},
            {"Name": "H2", "Kind": "Hidden", "N": 4, "Skip": "H1", "Activation": "Sigmoid",
             "WeightInit": {"Scheme": "Gaussian", "Scale": 0.7, "Bias": -0.3}},
            {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y",
             "Source": ["H2", "In"], "Skip": ["H2", "H1"], "Activation": "Linear",
             "WeightInit": {"Scheme": "Gaussian", "Scale": 0.4, "Bias": 0.1}}
        ]})";
    const Dataset x = testing::random_dataset(10, 6, testing::RowShape::kUniform, true, 3, "x");
    const Dataset y = testing::random_dataset(10, 4, testing::RowShape::kUniform, true, 4, "y");
    Network net =
        Network::create(NetworkConfig::from_json(json), {{"x", 6}, {"y", 4}}, cpu_options());
    const size_t rows = 10;
    const Matrix xd = dense(x);
    Matrix z1(rows * 4, 0.0);
    add_product(xd, rows, 6, net.get_parameter("weight:In->H1"), 4, false, z1);
    const Matrix a1 =
        apply(z1, rows, 4, net.get_parameter("bias:H1"), [](double z) { return std::tanh(z); });
    Matrix z2(rows * 4, 0.0);
    add_product(a1, rows, 4, net.get_parameter("weight:H1->H2"), 4, false, z2);
    for (size_t i = 0; i < z2.size(); ++i) z2[i] += a1[i];  // the skip, inside the sigmoid
    const Matrix a2 = apply(z2, rows, 4, net.get_parameter("bias:H2"), sigmoid);
    Matrix zo(rows * 4, 0.0);
    add_product(a2, rows, 4, net.get_parameter("weight:H2->Out"), 4, false, zo);
    add_product(xd, rows, 6, net.get_parameter("weight:In->Out"), 4, false, zo);
    for (size_t i = 0; i < zo.size(); ++i) zo[i] += a2[i] + a1[i];
    const Matrix o = apply(zo, rows, 4, net.get_parameter("bias:Out"), [](double z) { return z; });
    Predictor predictor(net, {{"x", &x}});
    expect_close(predictor.scores(0, rows, "H2"), a2, 1e-5, "H2");
    expect_close(predictor.scores(0, rows), o, 1e-5, "Out");

    // Training moves the skipped layer through both of its paths, and the loss goes down.
    TrainOptions to;
    to.batch = 5;
    to.epochs = 20;
    to.optimizer.learning_rate = 0.05f;
    Trainer trainer(net, {{"x", &x}, {"y", &y}}, to);
    const double loss0 = trainer.evaluate_loss();
    trainer.fit();
    EXPECT_LT(trainer.evaluate_loss(), 0.8 * loss0);
}

// ---------------------------------------------------------------- several outputs

TEST(SeveralOutputs, LossesAddUpAndPredictionPicksTheLayerByName) {
    const char* json = R"({
        "ErrorFunction": "L2",
        "Layers": [
            {"Name": "In1", "Kind": "Input", "N": "auto", "DataSet": "a", "Sparse": true},
            {"Name": "In2", "Kind": "Input", "N": "auto", "DataSet": "b", "Sparse": true},
            {"Name": "H", "Kind": "Hidden", "N": 5, "Source": ["In1", "In2"],
             "Activation": "Tanh"},
            {"Name": "Out1", "Kind": "Output", "N": "auto", "DataSet": "y1", "Source": "H",
             "Activation": "Sigmoid"},
            {"Name": "Out2", "Kind": "Output", "N": "auto", "DataSet": "y2",
             "Source": ["H", "In2"], "Activation": "Linear"}
        ]})";
    const size_t rows = 16;
    const Dataset a = testing::random_dataset(rows, 7, testing::RowShape::kPowerLaw, false, 1, "a");
    const Dataset b = testing::random_dataset(rows, 5, testing::RowShape::kUniform, true, 2, "b");
    const Dataset y1 = testing::random_dataset(rows, 6, testing::RowShape::kUniform, true, 3, "y1");
    const Dataset y2 = testing::random_dataset(rows, 3, testing::RowShape::kUniform, true, 4, "y2");
    Network net = Network::create(NetworkConfig::from_json(json),
                                  {{"a", 7}, {"b", 5}, {"y1", 6}, {"y2", 3}}, cpu_options());
    Trainer trainer(net, {{"a", &a}, {"b", &b}, {"y1", &y1}, {"y2", &y2}}, TrainOptions{});
    Predictor predictor(net, {{"a", &a}, {"b", &b}});
    // Default: the first Output layer; the second by name.
    const std::vector<float> first = predictor.scores(0, rows);
    EXPECT_EQ(first, predictor.scores(0, rows, "Out1"));
    const std::vector<float> second = predictor.scores(0, rows, "Out2");
    ASSERT_EQ(first.size(), rows * 6);
    ASSERT_EQ(second.size(), rows * 3);
    auto l2 = [&](const std::vector<float>& out, const Dataset& t) {
        const Matrix td = dense(t);
        double sum = 0;
        for (size_t i = 0; i < out.size(); ++i) sum += 0.5 * std::pow(out[i] - td[i], 2);
        return sum / double(rows);
    };
    const double want = l2(first, y1) + l2(second, y2);
    EXPECT_NEAR(trainer.evaluate_loss(), want, 1e-5 * want);

    PredictOptions po;
    po.k = 2;
    po.output_layer = "Out2";
    const TopK top = predictor.top_k(po);
    for (size_t r = 0; r < rows; ++r) {
        const float* s = second.data() + r * 3;
        const uint32_t best = uint32_t(std::max_element(s, s + 3) - s);
        EXPECT_EQ(top.indices[r * 2], best) << r;
    }
    try {
        predictor.scores(0, 1, "Nope");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    }

    // Training lowers the summed loss.
    TrainOptions to;
    to.batch = 4;
    to.epochs = 30;
    to.optimizer.learning_rate = 0.05f;
    Trainer fit(net, {{"a", &a}, {"b", &b}, {"y1", &y1}, {"y2", &y2}}, to);
    const double loss0 = fit.evaluate_loss();
    fit.fit();
    EXPECT_LT(fit.evaluate_loss(), 0.8 * loss0);
}

// ---------------------------------------------------------------- refused topologies

void expect_build_error(const std::string& layers, ErrorCategory category,
                        const std::string& text) {
    SCOPED_TRACE(layers);
    const NetworkConfig config = NetworkConfig::from_json(R"({"Layers": [)" + layers + "]}");
    try {
        Network::create(config, {{"x", 6}, {"y", 6}}, cpu_options());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), category) << e.what();
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
}

TEST(TopologyErrors, WhatTheEngineDoesNotRunIsRefusedByName) {
    const std::string in = R"({"Name": "In", "Kind": "Input", "N": 6, "DataSet": "x"},)";
    // Skip from an Input layer, from an Output layer, and from a layer of another width.
    expect_build_error(in + R"({"Name": "H", "Kind": "Hidden", "N": 6, "Skip": "In"},
                               {"Name": "Out", "Kind": "Output", "N": 6, "DataSet": "y"})",
                       ErrorCategory::kNotImplemented,
                       "$.Layers[1].Skip: not implemented yet: Skip from an Input layer ('In')");
    expect_build_error(in + R"({"Name": "Out", "Kind": "Output", "N": 6, "DataSet": "y"},
                               {"Name": "Out2", "Kind": "Output", "N": 6, "DataSet": "y",
                                "Source": "In", "Skip": "Out"})",
                       ErrorCategory::kNotImplemented,
                       "not implemented yet: Skip from an Output layer ('Out')");
    expect_build_error(in + R"({"Name": "H", "Kind": "Hidden", "N": 4},
                               {"Name": "Out", "Kind": "Output", "N": 6, "DataSet": "y",
                                "Skip": "H"})",
                       ErrorCategory::kConfig,
                       "$.Layers[2].Skip: layer 'H' has N = 4 but layer 'Out' has N = 6");
    // A transposed use on an edge from an Input layer (a column gather).
    expect_build_error(in + R"({"Name": "H", "Kind": "Hidden", "N": 6},
                               {"Name": "Out", "Kind": "Output", "N": 6, "DataSet": "y",
                                "Source": ["H", "In"], "SharedWeights": {"InputLayer": "In",
                                "SourceInputLayer": "H", "SourceOutputLayer": "Out",
                                "Transposed": true}})",
                       ErrorCategory::kNotImplemented,
                       "not implemented yet: SharedWeights with Transposed on an edge from an "
                       "Input layer ('In')");
    // Sizes that do not fit, with and without Transposed.
    expect_build_error(in + R"({"Name": "H", "Kind": "Hidden", "N": 4},
                               {"Name": "Out", "Kind": "Output", "N": 6, "DataSet": "y",
                                "SharedWeights": {"InputLayer": "H", "SourceInputLayer": "In",
                                "SourceOutputLayer": "H"}})",
                       ErrorCategory::kConfig,
                       "the edge 'H' -> 'Out' needs a 4 x 6 matrix, but 'In' -> 'H' is 6 x 4");
    expect_build_error(in + R"({"Name": "H", "Kind": "Hidden", "N": 4},
                               {"Name": "H2", "Kind": "Hidden", "N": 4,
                                "SharedWeights": {"InputLayer": "H", "SourceInputLayer": "In",
                                "SourceOutputLayer": "H", "Transposed": true}},
                               {"Name": "Out", "Kind": "Output", "N": 6, "DataSet": "y"})",
                       ErrorCategory::kConfig, "(transposed: 4 x 6)");
}

TEST(TopologyErrors, ConfigsBuiltInCodeAreCheckedToo) {
    // from_json refuses these; a NetworkConfig edited in code meets the very same rules
    // (NetworkConfig::validate, called when the network is built), with the same messages.
    NetworkConfig c = NetworkConfig::from_json(kTied);
    c.layers[1].shared_weights.push_back({"In", "In", "H", false});  // In -> H shares itself
    try {
        Network::create(c, {{"x", kItems}}, cpu_options());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kConfig) << e.what();
    }
    c = NetworkConfig::from_json(kTied);
    c.layers[2].skips.push_back("Nope");
    try {
        Network::create(c, {{"x", kItems}}, cpu_options());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kConfig) << e.what();
        EXPECT_NE(std::string(e.what()).find("$.Layers[2].Skip[0]: unknown layer \"Nope\""),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace sparsenet
