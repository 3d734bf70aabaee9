// The network language end to end, against values computed here from the parameters: the
// activation parameters reach the forward pass, every weight initialiser draws from its
// distribution, the sparseness penalty adds beta * sum KL(p || mean activation) to the loss,
// DeltaNorm clips each example's delta, WeightNorm clips each unit's incoming weights after a
// step, and every hidden activation trains with dropout (alpha dropout on ELU/SELU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

NetworkOptions cpu_options(uint64_t seed = 3) {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = seed;
    return o;
}

// Dense copy of rows [0, rows) of a CSR dataset.
std::vector<double> dense(const Dataset& d) {
    std::vector<double> m(d.rows * d.cols, 0.0);
    for (uint64_t r = 0; r < d.rows; ++r)
        for (uint64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e)
            m[r * d.cols + d.indices[e]] = d.values.empty() ? 1.0 : d.values[e];
    return m;
}

// a[rows, out] = f(x[rows, in] . w[in, out] + b) in double, f given.
template <class F>
std::vector<double> layer_forward(const std::vector<double>& x, size_t rows, size_t in,
                                  const std::vector<float>& w, const std::vector<float>& b,
                                  size_t out, F f) {
    std::vector<double> a(rows * out);
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < out; ++j) {
            double z = b[j];
            for (size_t i = 0; i < in; ++i) z += x[r * in + i] * double(w[i * out + j]);
            a[r * out + j] = f(z);
        }
    return a;
}

// ---------------------------------------------------------------- activation parameters

TEST(LanguageTraining, ActivationParametersReachTheForwardPass) {
    struct Act {
        std::string json;  // Activation and its keys on the output layer
        std::function<double(double)> f;
    };
    const double slope = 0.3, alpha = 0.7, lambda = 1.2;
    const std::vector<Act> acts = {
        {R"("Activation": "LRelu")", [&](double z) { return z > 0 ? z : 0.05 * z; }},
        {R"("Activation": "LRelu", "Slope": 0.3)", [&](double z) { return z > 0 ? z : slope * z; }},
        {R"("Activation": "Elu", "ELUAlpha": 0.7)",
         [&](double z) { return z > 0 ? z : alpha * (std::exp(z) - 1); }},
        {R"("Activation": "Selu", "ELUAlpha": 0.7, "SELULambda": 1.2)",
         [&](double z) { return lambda * (z > 0 ? z : alpha * (std::exp(z) - 1)); }},
        {R"("Activation": "Selu")",
         [&](double z) { return 1.1 * (z > 0 ? z : 1.5 * (std::exp(z) - 1)); }},
        {R"("Activation": "SoftPlus")", [&](double z) { return std::log1p(std::exp(z)); }},
        {R"("Activation": "SoftSign")", [&](double z) { return z / (1 + std::fabs(z)); }},
    };
    const Dataset x = testing::random_dataset(12, 6, testing::RowShape::kUniform, true, 5, "x");
    const Dataset y = testing::random_dataset(12, 4, testing::RowShape::kUniform, true, 6, "y");
    for (const Act& act : acts) {
        SCOPED_TRACE(act.json);
        // Network-wide values that the layer keys override (or not).
        const NetworkConfig config = NetworkConfig::from_json(
            R"({ "ErrorFunction": "L2", "RELUSlope": 0.05, "ELUAlpha": 1.5, "SELULambda": 1.1,
                 "Layers": [ { "Name": "In", "N": 6, "DataSet": "x", "Sparse": true },
                             { "Name": "Out", "N": 4, "DataSet": "y", )" +
            act.json + R"(, "WeightInit": { "Scheme": "Gaussian", "Scale": 1.0 } } ] })");
        Network net = Network::create(config, {{"x", 6}, {"y", 4}}, cpu_options());
        Predictor predictor(net, {{"x", &x}});
        const std::vector<float> scores = predictor.scores(0, 12);
        const std::vector<double> want =
            layer_forward(dense(x), 12, 6, net.get_parameter("weight:In->Out"),
                          net.get_parameter("bias:Out"), 4, act.f);
        ASSERT_EQ(scores.size(), want.size());
        bool negative = false;
        for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_NEAR(scores[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
            negative = negative || want[i] < 0;
        }
        if (act.json.find("Soft") == std::string::npos) {
            EXPECT_TRUE(negative) << "no z < 0 seen";
        }
    }
}

// ---------------------------------------------------------------- weight initialisers

struct Stats {
    double mean = 0, sd = 0, lo = 1e300, hi = -1e300;
};

Stats stats(const std::vector<float>& v) {
    Stats s;
    for (float x : v) {
        s.mean += x;
        s.lo = std::min(s.lo, double(x));
        s.hi = std::max(s.hi, double(x));
    }
    s.mean /= double(v.size());
    for (float x : v) s.sd += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(s.sd / double(v.size()));
    return s;
}

TEST(LanguageTraining, WeightInitialisersFollowTheirFormulas) {
    // fan_in 300 (the input), fan_out 200 (the hidden layer): 60,000 weights per draw.
    const double fan_in = 300, fan_out = 200;
    struct Scheme {
        std::string name;
        double scale;
        double lo, hi, mean, sd;  // expected support and moments
    };
    const double xavier = std::sqrt(6.0 / (fan_in + fan_out));
    const double caffe = 2.0 * std::sqrt(3.0 / fan_out);
    const double inf = 1e300;
    const std::vector<Scheme> schemes = {
        {"Xavier", 1.0, -xavier / 2, xavier / 2, 0, xavier / std::sqrt(12.0)},
        {"CaffeXavier", 2.0, -caffe, caffe, 0, caffe / std::sqrt(3.0)},
        {"Gaussian", 0.05, -inf, inf, 0, 0.05},
        {"Uniform", 0.3, -0.3, 0.3, 0, 0.3 / std::sqrt(3.0)},
        {"UnitBall", 0.4, 0.0, 0.4, 0.2, 0.4 / std::sqrt(12.0)},
        {"Constant", -0.7, -0.7, -0.7, -0.7, 0.0},
        {"SELU", 1.5, -inf, inf, 0, 1.5 / std::sqrt(fan_in)},
    };
    for (const Scheme& s : schemes) {
        SCOPED_TRACE(s.name);
        const NetworkConfig config = NetworkConfig::from_json(
            R"({ "Layers": [ { "Name": "In", "N": 300, "DataSet": "x", "Sparse": true },
                             { "Name": "H", "N": 200, "WeightInit": { "Scheme": ")" +
            s.name + R"(", "Scale": )" + std::to_string(s.scale) + R"(, "Bias": 0.25 } },
                             { "Name": "Out", "N": 3, "DataSet": "y" } ] })");
        Network net = Network::create(config, {{"x", 300}, {"y", 3}}, cpu_options(11));
        const std::vector<float> w = net.get_parameter("weight:In->H");
        ASSERT_EQ(w.size(), 60000u);
        const Stats st = stats(w);
        EXPECT_GE(st.lo, s.lo - 1e-7);
        EXPECT_LE(st.hi, s.hi + 1e-7);
        if (s.sd > 0) {
            // Bounded schemes reach near both ends of their support.
            if (s.lo > -inf) {
                EXPECT_LT(st.lo, s.lo + 0.01 * (s.hi - s.lo));
            }
            if (s.hi < inf) {
                EXPECT_GT(st.hi, s.hi - 0.01 * (s.hi - s.lo));
            }
            EXPECT_NEAR(st.mean, s.mean, 4 * s.sd / std::sqrt(60000.0));
            EXPECT_NEAR(st.sd, s.sd, 0.02 * s.sd);
        } else {
            for (float v : w) ASSERT_EQ(v, float(s.mean));
        }
        for (float b : net.get_parameter("bias:H")) ASSERT_EQ(b, 0.25f);
    }
}

// ---------------------------------------------------------------- SparsenessPenalty

std::string penalty_config(const std::string& penalty) {
    return R"({ "ErrorFunction": "L2", "SparsenessPenalty": )" + penalty + R"(,
        "Layers": [ { "Name": "In", "N": 6, "DataSet": "x", "Sparse": true },
                    { "Name": "H", "N": 5, "Sparse": true, "Activation": "Sigmoid",
                      "WeightInit": { "Scheme": "Gaussian", "Scale": 0.8 } },
                    { "Name": "Out", "N": 4, "DataSet": "y", "Activation": "Linear" } ] })";
}

TEST(LanguageTraining, SparsenessPenaltyAddsTheKlTermToTheLoss) {
    const Dataset x = testing::random_dataset(10, 6, testing::RowShape::kUniform, false, 7, "x");
    const Dataset y = testing::random_dataset(10, 4, testing::RowShape::kUniform, true, 8, "y");
    const double p = 0.2, beta = 1.5;
    Network with =
        Network::create(NetworkConfig::from_json(penalty_config(R"({ "p": 0.2, "beta": 1.5 })")),
                        {{"x", 6}, {"y", 4}}, cpu_options());
    Network without = Network::create(NetworkConfig::from_json(penalty_config("{}")),
                                      {{"x", 6}, {"y", 4}}, cpu_options());
    for (const Parameter& prm : with.parameters()) {
        ASSERT_EQ(with.get_parameter(prm.name), without.get_parameter(prm.name)) << prm.name;
    }
    TrainOptions to;
    to.batch = 10;
    Trainer tw(with, {{"x", &x}, {"y", &y}}, to);
    Trainer two(without, {{"x", &x}, {"y", &y}}, to);
    double kl_all = 0;
    for (uint32_t first : {0u, 3u}) {
        const uint32_t count = 10 - first;
        // The hidden activations by hand, their batch means and the KL term.
        std::vector<double> xd = dense(x);
        xd.erase(xd.begin(), xd.begin() + first * 6);
        const std::vector<double> a = layer_forward(
            xd, count, 6, with.get_parameter("weight:In->H"), with.get_parameter("bias:H"), 5,
            [](double z) { return 1 / (1 + std::exp(-z)); });
        double kl = 0;
        for (size_t j = 0; j < 5; ++j) {
            double rho = 0;
            for (size_t r = 0; r < count; ++r) rho += a[r * 5 + j];
            rho /= count;
            kl += p * std::log(p / rho) + (1 - p) * std::log((1 - p) / (1 - rho));
        }
        const double diff = tw.compute_loss(first, count) - two.compute_loss(first, count);
        EXPECT_NEAR(diff, beta * kl, 1e-5 * beta * kl + 1e-7) << "first " << first;
        EXPECT_GT(kl, 0.01);
        if (first == 0) kl_all = kl;
    }
    // Training reports the penalty too: the first epoch is one batch of every row, whose loss is
    // taken before the update.
    const double lw = tw.train_epoch().loss, lo = two.train_epoch().loss;
    EXPECT_NEAR(lw - lo, beta * kl_all, 1e-5 * beta * kl_all);
}

// ---------------------------------------------------------------- DeltaNorm

std::string norm_config(const std::string& hidden_extra, const std::string& output_extra) {
    return R"({ "ErrorFunction": "L2",
        "Layers": [ { "Name": "In", "N": 6, "DataSet": "x", "Sparse": true },
                    { "Name": "H", "N": 5, "Activation": "Tanh",
                      "WeightInit": { "Scheme": "Gaussian", "Scale": 0.8 } )" +
           hidden_extra + R"( },
                    { "Name": "Out", "N": 4, "DataSet": "y", "Activation": "Linear",
                      "WeightInit": { "Scheme": "Gaussian", "Scale": 0.8 } )" +
           output_extra + " } ] }";
}

double norm(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return std::sqrt(s);
}

TEST(LanguageTraining, DeltaNormClipsEachExamplesDelta) {
    const Dataset x = testing::random_dataset(8, 6, testing::RowShape::kUniform, true, 9, "x");
    const Dataset y = testing::random_dataset(8, 4, testing::RowShape::kUniform, true, 10, "y");
    const double c_out = 0.05, c_hidden = 0.01;
    Network plain = Network::create(NetworkConfig::from_json(norm_config("", "")),
                                    {{"x", 6}, {"y", 4}}, cpu_options());
    Network clipped = Network::create(
        NetworkConfig::from_json(norm_config(R"(, "DeltaNorm": 0.01)", R"(, "DeltaNorm": 0.05)")),
        {{"x", 6}, {"y", 4}}, cpu_options());
    TrainOptions to;
    to.batch = 8;
    Trainer tp(plain, {{"x", &x}, {"y", &y}}, to);
    Trainer tc(clipped, {{"x", &x}, {"y", &y}}, to);
    int clipped_rows = 0;
    for (uint32_t row = 0; row < 8; ++row) {
        // One example: the output bias gradient is its output delta, the hidden bias gradient
        // its hidden delta (which is linear in the output delta).
        const auto gp = tp.compute_gradients(row, 1);
        const auto gc = tc.compute_gradients(row, 1);
        const std::vector<float>& out_p = gp.at("bias:Out");
        const double f_out = std::min(1.0, c_out / norm(out_p));
        for (size_t j = 0; j < 4; ++j)
            EXPECT_NEAR(gc.at("bias:Out")[j], out_p[j] * f_out, 1e-6) << "row " << row;
        std::vector<float> hid = gp.at("bias:H");
        for (float& v : hid) v = float(v * f_out);
        const double f_hid = std::min(1.0, c_hidden / norm(hid));
        for (size_t j = 0; j < 5; ++j)
            EXPECT_NEAR(gc.at("bias:H")[j], hid[j] * f_hid, 1e-6) << "row " << row;
        clipped_rows += f_out < 1 && f_hid < 1;
    }
    EXPECT_GT(clipped_rows, 0);
    // A whole batch: the bias gradient is the mean of clipped deltas, so its norm is <= c.
    const auto g = tc.compute_gradients(0, 8);
    EXPECT_LE(norm(g.at("bias:Out")), c_out * (1 + 1e-5));
    EXPECT_LE(norm(g.at("bias:H")), c_hidden * (1 + 1e-5));
}

// ---------------------------------------------------------------- WeightNorm

// Column j of w [rows, cols] scaled to norm c when longer.
std::vector<double> clip_columns(const std::vector<float>& w, size_t rows, size_t cols, double c) {
    std::vector<double> out(w.begin(), w.end());
    for (size_t j = 0; j < cols; ++j) {
        double n = 0;
        for (size_t i = 0; i < rows; ++i) n += double(w[i * cols + j]) * w[i * cols + j];
        n = std::sqrt(n);
        if (n <= c) continue;
        for (size_t i = 0; i < rows; ++i) out[i * cols + j] *= c / n;
    }
    return out;
}

double max_column_norm(const std::vector<float>& w, size_t rows, size_t cols) {
    double m = 0;
    for (size_t j = 0; j < cols; ++j) {
        double n = 0;
        for (size_t i = 0; i < rows; ++i) n += double(w[i * cols + j]) * w[i * cols + j];
        m = std::max(m, std::sqrt(n));
    }
    return m;
}

TEST(LanguageTraining, WeightNormClipsEachUnitsIncomingWeightsAfterTheStep) {
    const Dataset x = testing::random_dataset(16, 6, testing::RowShape::kUniform, true, 12, "x");
    const Dataset y = testing::random_dataset(16, 4, testing::RowShape::kUniform, true, 13, "y");
    const double c = 1.0;
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
        SCOPED_TRACE(to_string(kind));
        Network plain = Network::create(NetworkConfig::from_json(norm_config("", "")),
                                        {{"x", 6}, {"y", 4}}, cpu_options());
        Network normed = Network::create(NetworkConfig::from_json(norm_config(
                                             R"(, "WeightNorm": 1.0)", R"(, "WeightNorm": 1.0)")),
                                         {{"x", 6}, {"y", 4}}, cpu_options());
        TrainOptions to;
        to.batch = 16;  // one step per epoch
        to.optimizer.kind = kind;
        to.optimizer.learning_rate = kind == OptimizerKind::kSgd ? 2.0f : 0.3f;
        Trainer tp(plain, {{"x", &x}, {"y", &y}}, to);
        Trainer tn(normed, {{"x", &x}, {"y", &y}}, to);
        tp.train_epoch();
        tn.train_epoch();
        // After one step from the same weights: the plain result with long columns clipped.
        int clipped = 0;
        for (const auto& [name, rows, cols] : std::vector<std::tuple<std::string, size_t, size_t>>{
                 {"weight:In->H", 6, 5}, {"weight:H->Out", 5, 4}}) {
            const std::vector<float> wp = plain.get_parameter(name);
            const std::vector<float> wn = normed.get_parameter(name);
            const std::vector<double> want = clip_columns(wp, rows, cols, c);
            for (size_t i = 0; i < want.size(); ++i) {
                EXPECT_NEAR(wn[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << name << i;
                clipped += want[i] != double(wp[i]);
            }
        }
        EXPECT_GT(clipped, 0) << "the step left every column within the norm";
        EXPECT_EQ(normed.get_parameter("bias:H"), plain.get_parameter("bias:H"));
        // The constraint holds after every later step.
        for (int e = 0; e < 3; ++e) {
            tn.train_epoch();
            EXPECT_LE(max_column_norm(normed.get_parameter("weight:In->H"), 6, 5), c * (1 + 1e-6));
            EXPECT_LE(max_column_norm(normed.get_parameter("weight:H->Out"), 5, 4), c * (1 + 1e-6));
        }
    }
}

// ---------------------------------------------------------------- dropout

TEST(LanguageTraining, EveryHiddenActivationTrainsWithDropoutDeterministically) {
    const Dataset x = testing::random_dataset(64, 20, testing::RowShape::kPowerLaw, false, 14, "x");
    for (const char* act :
         {"Sigmoid", "Tanh", "Relu", "Linear", "LRelu", "Elu", "Selu", "SoftPlus", "SoftSign"}) {
        SCOPED_TRACE(act);
        const NetworkConfig config = NetworkConfig::from_json(
            std::string(R"({ "ErrorFunction": "ScaledMarginalCrossEntropy", "RELUSlope": 0.1,
                "Layers": [ { "Name": "In", "N": 20, "DataSet": "x", "Sparse": true },
                            { "Name": "H", "N": 16, "pDropout": 0.3, "Activation": ")") +
            act + R"(", "WeightInit": { "Scheme": "SELU" } },
                            { "Name": "Out", "N": 20, "DataSet": "x", "Activation": "Sigmoid" } ] })");
        std::vector<float> first;
        for (int run = 0; run < 2; ++run) {
            Network net = Network::create(config, {{"x", 20}}, cpu_options(21));
            TrainOptions to;
            to.batch = 16;
            to.optimizer.learning_rate = 0.1f;
            Trainer trainer(net, {{"x", &x}}, to);
            double loss = 0;
            for (int e = 0; e < 3; ++e) loss = trainer.train_epoch().loss;
            EXPECT_TRUE(std::isfinite(loss)) << loss;
            const std::vector<float> w = net.get_parameter("weight:In->H");
            if (run == 0) {
                first = w;
            } else {
                EXPECT_EQ(0, std::memcmp(first.data(), w.data(), w.size() * sizeof(float)));
            }
        }
    }
}

}  // namespace
}  // namespace sparsenet
