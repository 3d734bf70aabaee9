// FixedWeights with Fit GraphFilter (config.h; engine::graph_filter_matrix, linear_fit.h): the
// fit against GF-CF's formula computed independently in double (Jacobi eigenvectors, not
// LAPACK), the subspace iteration against LAPACK's exact eigenvectors where the spectrum has a
// gap, and the fit reaching a network before its first step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "engine/linear_fit.h"
#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

constexpr uint64_t kRows = 60;
constexpr uint32_t kItems = 12;

// Eigenvalues and eigenvectors of the symmetric [n, n] matrix a (double, row-major) by cyclic
// Jacobi rotations: vectors[i * n + c] is component i of eigenvector c.
void jacobi(std::vector<double> a, size_t n, std::vector<double>& values,
            std::vector<double>& vectors) {
    vectors.assign(n * n, 0.0);
    for (size_t i = 0; i < n; ++i) vectors[i * n + i] = 1.0;
    for (int sweep = 0; sweep < 100; ++sweep) {
        double off = 0.0;
        for (size_t p = 0; p < n; ++p)
            for (size_t q = p + 1; q < n; ++q) off += a[p * n + q] * a[p * n + q];
        if (off < 1e-26) break;
        for (size_t p = 0; p < n; ++p) {
            for (size_t q = p + 1; q < n; ++q) {
                if (std::fabs(a[p * n + q]) < 1e-300) continue;
                const double theta = (a[q * n + q] - a[p * n + p]) / (2.0 * a[p * n + q]);
                const double t =
                    (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1.0));
                const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
                for (size_t k = 0; k < n; ++k) {  // columns p, q of A
                    const double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for (size_t k = 0; k < n; ++k) {  // rows p, q
                    const double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for (size_t k = 0; k < n; ++k) {
                    const double vkp = vectors[k * n + p], vkq = vectors[k * n + q];
                    vectors[k * n + p] = c * vkp - s * vkq;
                    vectors[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    values.resize(n);
    for (size_t i = 0; i < n; ++i) values[i] = a[i * n + i];
}

// GF-CF in double, straight from its definition.
std::vector<double> graph_filter_reference(const Dataset& x, const engine::GraphFilterFit& f,
                                           double scale) {
    const size_t n = x.cols, m = x.rows;
    auto value = [&](uint64_t e) { return x.values.empty() ? 1.0 : double(x.values[e]); };
    std::vector<double> dense(m * n, 0.0), du(m, 0.0), di(n, 0.0);
    for (uint64_t r = 0; r < m; ++r)
        for (uint64_t e = x.offsets[r]; e < x.offsets[r + 1]; ++e) {
            dense[r * n + x.indices[e]] = value(e);
            du[r] += value(e);
            di[x.indices[e]] += value(e);
        }
    auto pw = [](double d, double e) { return d > 0 ? std::pow(d, e) : 0.0; };
    std::vector<double> p(n * n, 0.0);  // R~^T R~
    for (uint64_t r = 0; r < m; ++r)
        for (size_t i = 0; i < n; ++i)
            for (size_t j = 0; j < n; ++j) {
                const double ri =
                    dense[r * n + i] * pw(du[r], -f.user_exponent) * pw(di[i], -f.item_exponent);
                const double rj =
                    dense[r * n + j] * pw(du[r], -f.user_exponent) * pw(di[j], -f.item_exponent);
                p[i * n + j] += ri * rj;
            }
    std::vector<double> values, vectors;
    jacobi(p, n, values, vectors);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return values[a] > values[b]; });
    std::vector<double> b(n * n);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
            double vvt = 0.0;
            for (uint32_t c = 0; c < f.k; ++c)
                vvt += vectors[i * n + order[c]] * vectors[j * n + order[c]];
            b[i * n + j] = scale * (p[i * n + j] + f.ideal_weight * pw(di[i], -f.item_exponent) *
                                                       vvt * pw(di[j], f.item_exponent));
        }
    return b;
}

void expect_matches(const std::vector<float>& got, const std::vector<double>& want,
                    const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double largest = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i])) << what << "[" << i << "]";
        largest = std::max(largest, std::fabs(want[i]));
    }
    EXPECT_GT(largest, 1e-2) << what << ": a vacuous comparison";
}

Dataset items(bool valued) {
    return testing::random_dataset(kRows, kItems, testing::RowShape::kPowerLaw, valued, 33, "x");
}

TEST(LinearFit, GraphFilterMatchesGfCfInDouble) {
    for (bool valued : {false, true}) {
        const Dataset x = items(valued);
        for (const engine::GraphFilterFit& f : {engine::GraphFilterFit{0, 0.0f, 0.5f, 0.5f},
                                                engine::GraphFilterFit{3, 0.3f, 0.5f, 0.5f},
                                                engine::GraphFilterFit{5, 1.5f, 0.25f, 0.75f},
                                                engine::GraphFilterFit{kItems, 0.5f, 0.0f, 1.0f}}) {
            SCOPED_TRACE(std::string(valued ? "valued" : "boolean") + ", k " + std::to_string(f.k) +
                         ", ideal weight " + std::to_string(f.ideal_weight) + ", exponents " +
                         std::to_string(f.user_exponent) + " " + std::to_string(f.item_exponent));
            expect_matches(engine::graph_filter_matrix(x, f, 2.0f),
                           graph_filter_reference(x, f, 2.0), "B");
        }
    }
}

TEST(LinearFit, GraphFilterRefusesMoreSingularVectorsThanItems) {
    try {
        engine::graph_filter_matrix(items(false), {kItems + 1, 1.0f, 0.5f, 0.5f}, 1.0f);
        FAIL() << "accepted K > items";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("K = 13 singular vectors of a matrix of 12 items"),
                  std::string::npos)
            << e.what();
    }
}

// A planted spectrum (eigenvalues 100 .. 93 over noise below 1): the subspace iteration finds
// the exact top eigenvectors' projector.
TEST(LinearFit, SubspaceIterationFindsTheExactTopEigenvectors) {
    const size_t n = 300;
    const uint32_t k = 8;
    std::vector<float> p(n * n, 0.0f);
    std::vector<double> q(n * n);
    // A fixed orthonormal-ish basis from a Householder reflection of a deterministic vector.
    std::vector<double> u(n);
    for (size_t i = 0; i < n; ++i) u[i] = std::sin(0.37 * double(i) + 1.0);
    double norm = 0.0;
    for (double v : u) norm += v * v;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j)
            q[i * n + j] = (i == j ? 1.0 : 0.0) - 2.0 * u[i] * u[j] / norm;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (size_t c = 0; c < n; ++c) {
                const double lambda = c < k ? 100.0 - double(c) : 0.9 * double(n - c) / double(n);
                s += q[i * n + c] * lambda * q[j * n + c];
            }
            p[i * n + j] = float(s);
        }
    const auto exact = engine::top_eigenvectors(p.data(), n, k, engine::EigenMethod::kExact);
    const auto iterated = engine::top_eigenvectors(p.data(), n, k, engine::EigenMethod::kSubspace);
    ASSERT_EQ(exact.size(), n * k);
    ASSERT_EQ(iterated.size(), n * k);
    // Distinct eigenvalues: each vector agrees (the signs are fixed the same way).
    for (size_t i = 0; i < exact.size(); ++i) EXPECT_NEAR(iterated[i], exact[i], 2e-4) << i;
    // And the exact ones are the planted ones (up to sign).
    for (uint32_t c = 0; c < k; ++c) {
        double dot = 0.0;
        for (size_t i = 0; i < n; ++i) dot += exact[c * n + i] * q[i * n + c];
        EXPECT_NEAR(std::fabs(dot), 1.0, 1e-4) << "eigenvector " << c;
    }
}

TEST(FixedWeights, GraphFilterIsFittedBeforeTheFirstStep) {
    const Dataset x = items(false);
    const std::string json = R"({ "Name": "gf", "ShuffleIndices": false, "Layers": [
        { "Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true },
        { "Name": "H", "Kind": "Hidden", "N": 4, "Activation": "Tanh", "Source": "In" },
        { "Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "x", "Sparse": true,
          "Activation": "Sigmoid", "Source": ["H", "In"], "FixedWeights": { "Source": "In",
          "Fit": "GraphFilter", "K": 3, "IdealWeight": 0.3, "Scale": 2, "InTraining": false } } ] })";
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 5;
    Network net = Network::create(NetworkConfig::from_json(json), {{"x", kItems}}, o);
    TrainOptions to;
    to.batch = 16;
    to.epochs = 1;
    Trainer trainer(net, {{"x", &x}}, to);
    expect_matches(net.get_parameter("weight:In->Out"),
                   graph_filter_reference(x, {3, 0.3f, 0.5f, 0.5f}, 2.0), "fitted");
    const std::vector<float> fitted = net.get_parameter("weight:In->Out");
    trainer.fit();
    EXPECT_EQ(net.get_parameter("weight:In->Out"), fitted);
}

// The In -> Out matrix of a new network of `fixed_weights` (a JSON array of entries on In) over
// 13 items once a Trainer on x has fitted it. 13 items: rows padded to the plan's stride, so a sum
// of entries runs through the padded transfer by blocks (Training::add_rows).
std::vector<float> fitted_edge(const std::string& fixed_weights, const Dataset& x) {
    const std::string json = R"({ "Name": "gf", "ShuffleIndices": false, "Layers": [
        { "Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": true },
        { "Name": "H", "Kind": "Hidden", "N": 4, "Activation": "Tanh", "Source": "In" },
        { "Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "x", "Sparse": true,
          "Activation": "Sigmoid", "Source": ["H", "In"], "FixedWeights": )" +
                             fixed_weights + " } ] }";
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.seed = 5;
    Network net = Network::create(NetworkConfig::from_json(json), {{"x", 13}}, o);
    TrainOptions to;
    to.batch = 16;
    to.epochs = 1;
    Trainer trainer(net, {{"x", &x}}, to);
    return net.get_parameter("weight:In->Out");
}

// Two entries of one source are one edge holding the sum of their fits: an EASE path and a
// graph filter blended with the Scale of each.
TEST(FixedWeights, EntriesOfOneSourceAreSummedIntoOneMatrix) {
    const Dataset x =
        testing::random_dataset(kRows, 13, testing::RowShape::kPowerLaw, false, 34, "x");
    const std::vector<float> got = fitted_edge(R"([
        { "Source": "In", "Fit": "EASE", "Lambda": 4, "Scale": 2, "InTraining": false },
        { "Source": "In", "Fit": "GraphFilter", "K": 3, "IdealWeight": 0.3, "Scale": -0.5,
          "InTraining": false } ])",
                                               x);
    const std::vector<float> ease = engine::ease_matrix(x, 4.0f, 2.0f);
    std::vector<double> want = graph_filter_reference(x, {3, 0.3f, 0.5f, 0.5f}, -0.5);
    for (size_t i = 0; i < want.size(); ++i) want[i] += ease[i];
    expect_matches(got, want, "EASE + graph filter");
}

// penalize_popularity divides column j by d_j^g, d_j the column sum (a valued entry counts its
// value); an item nobody holds gets a zero column; the rows are left as they are.
TEST(LinearFit, PopularityPenaltyDividesColumnsByTheItemsDegree) {
    Dataset x;
    x.name = "x";
    x.cols = 4;
    x.rows = 3;
    x.offsets = {0, 2, 3, 5};
    x.indices = {0, 1, 1, 0, 1};  // degrees 2, 3, 0, 0 (boolean)
    std::vector<float> b(16);
    std::iota(b.begin(), b.end(), 1.0f);
    std::vector<float> got = b;
    engine::penalize_popularity(got, x, 0.5f);
    const float factor[4] = {1.0f / std::sqrt(2.0f), 1.0f / std::sqrt(3.0f), 0.0f, 0.0f};
    for (size_t i = 0; i < 4; ++i)
        for (size_t j = 0; j < 4; ++j)
            EXPECT_FLOAT_EQ(got[i * 4 + j], b[i * 4 + j] * factor[j]) << i << "," << j;
    x.values = {4.0f, 1.0f, 1.0f, 0.5f, 2.0f};  // degrees 4.5, 4
    got = b;
    engine::penalize_popularity(got, x, 1.0f);
    EXPECT_FLOAT_EQ(got[4], b[4] / 4.5f);
    EXPECT_FLOAT_EQ(got[5], b[5] / 4.0f);
    got = b;
    engine::penalize_popularity(got, x, 0.0f);
    EXPECT_EQ(got, b);
    std::vector<float> wrong(9);
    EXPECT_THROW(engine::penalize_popularity(wrong, x, 0.5f), Error);
}

// Each entry's PopularityExponent applies to its own fit before the sum: EASE's columns over
// degree^0.5, the graph filter's over degree^0.2.
TEST(FixedWeights, PopularityExponentPenalizesEachEntrysFit) {
    const Dataset x =
        testing::random_dataset(kRows, 13, testing::RowShape::kPowerLaw, false, 35, "x");
    const std::vector<float> got = fitted_edge(R"([
        { "Source": "In", "Fit": "EASE", "Lambda": 4, "Scale": 2, "InTraining": false,
          "PopularityExponent": 0.5 },
        { "Source": "In", "Fit": "GraphFilter", "K": 3, "IdealWeight": 0.3, "Scale": 3,
          "InTraining": false, "PopularityExponent": 0.2 } ])",
                                               x);
    std::vector<double> degree(13, 0.0);
    for (uint32_t item : x.indices) degree[item] += 1.0;
    const std::vector<float> ease = engine::ease_matrix(x, 4.0f, 2.0f);
    const std::vector<double> filter = graph_filter_reference(x, {3, 0.3f, 0.5f, 0.5f}, 3.0);
    std::vector<double> want(ease.size());
    for (size_t i = 0; i < 13; ++i) {
        for (size_t j = 0; j < 13; ++j) {
            ASSERT_GT(degree[j], 1.0) << "item " << j << ": a weak test";
            want[i * 13 + j] = ease[i * 13 + j] / std::sqrt(degree[j]) +
                               filter[i * 13 + j] / std::pow(degree[j], 0.2);
        }
    }
    expect_matches(got, want, "penalised EASE + graph filter");
}

}  // namespace
}  // namespace sparsenet
