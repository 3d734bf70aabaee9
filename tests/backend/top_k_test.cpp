// top_k: per-row k best scores with sparse exclusions, ties to the lower column, padding slots,
// against a full-sort reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"

namespace sparsenet {
namespace {

using testing::Dense;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Scores with many ties (a few levels), some -inf and some NaN.
Dense<float> tied_scores(size_t rows, size_t cols, uint64_t seed) {
    Dense<float> s(rows, cols, 3, 1e9f);
    std::mt19937_64 rng(seed);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) {
            const uint64_t u = rng() % 100;
            s.at(r, c) = u == 0 ? -kInf : u == 1 ? std::nanf("") : float(int(u % 7) - 3) * 0.5f;
        }
    return s;
}

struct TopKResult {
    std::vector<float> scores;
    std::vector<uint32_t> indices;
};

void run_and_check(Backend& backend, const Dense<float>& s, const Dataset* exclude,
                   const testing::TestBatch* batch, size_t k, const std::string& what,
                   TopKResult* result = nullptr) {
    const size_t rows = s.rows, n = s.cols;
    TopKResult r;
    r.scores.assign(rows * k + 1, 123.0f);
    r.indices.assign(rows * k + 1, 7u);
    CsrBatchView ex;
    if (exclude != nullptr) ex = testing::csr_view(*exclude, *batch);
    backend.top_k(s.cview(), exclude != nullptr ? &ex : nullptr, k, r.scores.data(),
                  r.indices.data());
    for (size_t b = 0; b < rows; ++b) {
        std::set<uint32_t> excluded;
        if (exclude != nullptr) {
            const uint64_t e0 = exclude->offsets[batch->example(b)];
            const uint64_t e1 = exclude->offsets[batch->example(b) + 1];
            for (uint64_t e = e0; e < e1; ++e) excluded.insert(exclude->indices[e]);
        }
        std::vector<std::pair<float, uint32_t>> all;
        for (uint32_t c = 0; c < n; ++c)
            if (!excluded.count(c) && !std::isnan(s.at(b, c))) all.push_back({s.at(b, c), c});
        std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) {
            return x.first > y.first || (x.first == y.first && x.second < y.second);
        });
        for (size_t i = 0; i < k; ++i) {
            const float got_s = r.scores[b * k + i];
            const uint32_t got_i = r.indices[b * k + i];
            if (i < all.size()) {
                ASSERT_EQ(got_i, all[i].second) << what << " row " << b << " slot " << i;
                ASSERT_EQ(got_s, all[i].first) << what << " row " << b << " slot " << i;
                ASSERT_FALSE(excluded.count(got_i)) << what << " returned an excluded column";
            } else {
                ASSERT_EQ(got_s, -kInf) << what << " row " << b << " unused slot " << i;
                ASSERT_EQ(got_i, UINT32_MAX) << what << " row " << b << " unused slot " << i;
            }
        }
    }
    ASSERT_EQ(r.scores[rows * k], 123.0f) << what << " wrote past the end";
    ASSERT_EQ(r.indices[rows * k], 7u) << what << " wrote past the end";
    if (result != nullptr) *result = std::move(r);
}

TEST(TopK, MatchesSortReferenceOverGrid) {
    CpuBackend backend(2);
    uint64_t seed = 1;
    int cases = 0;
    for (size_t rows : {1, 7, 64})
        for (uint32_t n : {1u, 5u, 130u})
            for (size_t k : {size_t(1), size_t(3), size_t(n), size_t(n) + 4}) {
                const Dense<float> s = tied_scores(rows, n, seed++);
                const std::string base = "rows=" + std::to_string(rows) +
                                         " n=" + std::to_string(n) + " k=" + std::to_string(k);
                run_and_check(backend, s, nullptr, nullptr, k, base + " no exclusions");
                if (HasFatalFailure()) return;
                ++cases;
                for (testing::RowShape shape : testing::kAllShapes)
                    for (bool permuted : {false, true}) {
                        const Dataset ex = testing::random_dataset(rows + 3, n, shape, false, seed);
                        const testing::TestBatch batch =
                            testing::make_batch(ex.rows, rows, permuted, seed++);
                        run_and_check(backend, s, &ex, &batch, k,
                                      base + " " + testing::shape_name(shape) +
                                          (permuted ? " permuted" : ""));
                        if (HasFatalFailure()) return;
                        ++cases;
                    }
            }
    EXPECT_EQ(cases, 3 * 3 * 4 * 9);
}

TEST(TopK, AllTiesGoToTheLowestColumns) {
    CpuBackend backend(1);
    Dense<float> s(1, 10, 0, 2.0f);
    std::vector<float> os(4);
    std::vector<uint32_t> oi(4);
    backend.top_k(s.cview(), nullptr, 4, os.data(), oi.data());
    EXPECT_EQ(oi, (std::vector<uint32_t>{0, 1, 2, 3}));
    EXPECT_EQ(os, (std::vector<float>{2, 2, 2, 2}));
}

TEST(TopK, EverythingExcludedGivesOnlyUnusedSlots) {
    CpuBackend backend(1);
    Dense<float> s = testing::random_dense<float>(2, 3, 0, 1);
    Dataset ex;
    ex.rows = 2;
    ex.cols = 3;
    ex.offsets = {0, 3, 4};
    ex.indices = {0, 1, 2, 1};
    const testing::TestBatch batch = testing::make_batch(2, 2, false, 0);
    std::vector<float> os(6);
    std::vector<uint32_t> oi(6);
    CsrBatchView view = testing::csr_view(ex, batch);
    backend.top_k(s.cview(), &view, 3, os.data(), oi.data());
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(os[i], -kInf);
        EXPECT_EQ(oi[i], UINT32_MAX);
    }
    EXPECT_EQ(oi[5], UINT32_MAX);
    EXPECT_NE(oi[3], 1u);
    EXPECT_NE(oi[4], 1u);
}

TEST(TopK, LargeRowsAreThreadCountIndependent) {
    CpuBackend one(1), two(2);
    const Dense<float> s = testing::random_dense<float>(200, 3000, 1, 4);
    const Dataset ex = testing::random_dataset(250, 3000, testing::RowShape::kPowerLaw, false, 2);
    const testing::TestBatch batch = testing::make_batch(250, 200, true, 3);
    for (size_t k : {1, 10, 100, 3000}) {
        TopKResult r1, r2;
        run_and_check(one, s, &ex, &batch, k, "k=" + std::to_string(k) + " threads=1", &r1);
        run_and_check(two, s, &ex, &batch, k, "k=" + std::to_string(k) + " threads=2", &r2);
        EXPECT_EQ(r1.indices, r2.indices);
        EXPECT_EQ(0, std::memcmp(r1.scores.data(), r2.scores.data(), r1.scores.size() * 4));
    }
}

// z of an output layer before its activation: continuous values, large ones (the Sigmoid and
// Tanh saturate to 1.0f, so that their activations tie where the z differ), exact ties, NaN.
Dense<float> pre_activations(size_t rows, size_t cols, uint64_t seed) {
    Dense<float> z = testing::random_dense<float>(rows, cols, 5, seed, -6, 6, 1e9f);
    std::mt19937_64 rng(seed + 9);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) {
            const uint64_t u = rng() % 50;
            if (u == 0) z.at(r, c) = std::nanf("");
            if (u == 1) z.at(r, c) = 30.0f + float(rng() % 10);
            if (u == 2) z.at(r, c) = 0.25f;
        }
    return z;
}

// top_k with the activation inside (predict's path, issue 45) is bias_activation_forward then
// top_k bit for bit: every element-wise activation, with and without a bias and an exclusion,
// rows whose width is not a multiple of 16 (the vector code's tail), padded rows, k over n.
TEST(TopK, ActivationInsideIsBiasActivationForwardThenTopK) {
    CpuBackend cpu(2);
    int cases = 0;
    for (int kind = 0; kind <= int(Activation::kSoftSign); ++kind) {
        if (Activation(kind) == Activation::kSoftMax) continue;
        formulas::ActivationParams act;
        act.kind = Activation(kind);
        act.slope = 0.2f;
        act.alpha = 0.8f;
        act.lambda = 1.1f;
        for (size_t n : {1, 17, 100, 1000, 4099})
            for (bool with_bias : {false, true})
                for (bool with_exclusion : {false, true})
                    for (size_t k : {size_t(1), size_t(10), size_t(100), n + 3}) {
                        const uint64_t seed = uint64_t(++cases) * 31;
                        const size_t rows = 37;
                        const Dense<float> z = pre_activations(rows, n, seed);
                        std::vector<float> bias(n);
                        std::mt19937_64 rng(seed);
                        for (float& v : bias) v = float(int(rng() % 200) - 100) / 50.0f;
                        const float* b = with_bias ? bias.data() : nullptr;
                        const Dataset ex = testing::random_dataset(
                            rows + 3, uint32_t(n), testing::RowShape::kPowerLaw, false, seed + 1);
                        const testing::TestBatch batch =
                            testing::make_batch(ex.rows, rows, true, seed + 2);
                        CsrBatchView exv = testing::csr_view(ex, batch);
                        const CsrBatchView* e = with_exclusion ? &exv : nullptr;
                        Dense<float> a = z;
                        cpu.bias_activation_forward(act, b, a.view());
                        std::vector<float> want_s(rows * k), got_s(rows * k);
                        std::vector<uint32_t> want_i(rows * k), got_i(rows * k);
                        cpu.top_k(a.cview(), e, k, want_s.data(), want_i.data());
                        const TopKActivation fused{act, b};
                        cpu.top_k(z.cview(), e, k, got_s.data(), got_i.data(), &fused);
                        ASSERT_EQ(got_i, want_i) << to_string(act.kind) << " n=" << n << " k=" << k;
                        ASSERT_EQ(0, std::memcmp(got_s.data(), want_s.data(), got_s.size() * 4))
                            << to_string(act.kind) << " n=" << n << " k=" << k;
                    }
    }
    // SoftMax needs the row's max and sum: refused, on every backend (Backend::top_k's check).
    const Dense<float> z = pre_activations(2, 5, 1);
    std::vector<float> os(2);
    std::vector<uint32_t> oi(2);
    formulas::ActivationParams softmax;
    softmax.kind = Activation::kSoftMax;
    const TopKActivation fused{softmax, nullptr};
    try {
        cpu.top_k(z.cview(), nullptr, 1, os.data(), oi.data(), &fused);
        FAIL() << "SoftMax must be refused";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInternal);
        EXPECT_NE(std::string(e.what()).find("SoftMax"), std::string::npos) << e.what();
    }
}

TEST(TopK, DoubleInstantiation) {
    Dense<double> s(2, 4);
    const double v[] = {0.5, 2.0, -1.0, 2.0, 3.0, 1.0, 1.0, 0.0};
    for (size_t i = 0; i < 8; ++i) s.data[i] = v[i];
    std::vector<double> os(6);
    std::vector<uint32_t> oi(6);
    std::vector<cpu::ScoreIndex<double>> scratch;
    cpu::top_k(s.cmat(), static_cast<const cpu::CsrT<double>*>(nullptr), 3, os.data(), oi.data(),
               scratch, 1);
    EXPECT_EQ(oi, (std::vector<uint32_t>{1, 3, 0, 0, 1, 2}));
    EXPECT_EQ(os, (std::vector<double>{2.0, 2.0, 0.5, 3.0, 1.0, 1.0}));
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

// ---- top_k ----

// Scores with many ties, -inf, NaN, and both signed zeros; or continuous ones.
Dense<float> topk_scores(size_t rows, size_t cols, bool tied, uint64_t seed) {
    Dense<float> s(rows, cols, 3, 1e9f);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) {
            if (!tied) {
                s.at(r, c) = float(u(rng));
                continue;
            }
            const uint64_t v = rng() % 100;
            s.at(r, c) = v == 0   ? -kInf
                         : v == 1 ? kNaN
                         : v == 2 ? -0.0f
                         : v == 3 ? 0.0f
                         : v == 4 ? kInf
                                  : float(int(v % 7) - 3) * 0.5f;
        }
    return s;
}

TEST_F(CudaParity, TopKExactlyMatchesTheCpu) {
    int cases = 0;
    for (size_t n : {1, 5, 33, 1000, 4099})
        for (size_t rows : {1, 7, 64})
            for (bool tied : {true, false})
                for (int exclusion : {0, 1, 2})  // none, uniform rows, power-law rows
                    for (size_t k : {size_t(1), size_t(3), size_t(10), size_t(64), size_t(100),
                                     size_t(1000), n, n + 5}) {
                        const uint64_t seed = uint64_t(++cases) * 53;
                        if (!sampled(uint64_t(cases))) continue;
                        const Dense<float> s = topk_scores(rows, n, tied, seed);
                        const Dataset ex = testing::random_dataset(
                            rows + 3, uint32_t(n),
                            exclusion == 2 ? RowShape::kPowerLaw : RowShape::kUniform, false,
                            seed + 1);
                        const TestBatch batch = testing::make_batch(ex.rows, rows, true, seed + 2);
                        std::vector<float> want_s(rows * k, 123.0f), got_s(rows * k, 7.0f);
                        std::vector<uint32_t> want_i(rows * k, 7u), got_i(rows * k, 9u);
                        CsrBatchView ex_host = testing::csr_view(ex, batch);
                        cpu_.top_k(s.cview(), exclusion ? &ex_host : nullptr, k, want_s.data(),
                                   want_i.data());
                        DevMat sd(dev(), s);
                        DevCsr exd(dev(), ex, batch);
                        DeviceArray<float> os(dev(), rows * k, "top scores");
                        DeviceArray<uint32_t> oi(dev(), rows * k, "top indices");
                        dev().top_k(sd.cview(), exclusion ? &exd.view : nullptr, k, os.data(),
                                    oi.data());
                        got_s = fetch(os, rows * k);
                        got_i = fetch(oi, rows * k);
                        for (size_t i = 0; i < rows * k; ++i) {
                            ASSERT_EQ(got_i[i], want_i[i])
                                << "n=" << n << " rows=" << rows << " k=" << k
                                << (tied ? " tied" : "") << " exclusion=" << exclusion << " slot "
                                << i;
                            ASSERT_EQ(bits(got_s[i]), bits(want_s[i])) << "slot " << i;
                        }
                    }
}

// The device's top_k with the activation inside against its own bias_activation_forward then
// top_k (bit for bit: the same formula in both kernels), and against the CPU's selection over
// the device's activations (bit for bit: the ranking given the same values). How close the
// device's activations are to the CPU's is BiasActivationForwardEveryActivation's.
TEST_F(CudaParity, TopKWithActivationInsideMatchesTheSeparatePass) {
    int cases = 0;
    for (int kind = 0; kind < kActivations; ++kind) {
        if (Activation(kind) == Activation::kSoftMax) continue;
        const formulas::ActivationParams act = act_params(Activation(kind));
        for (size_t n : {1, 33, 1000, 4099})
            for (bool with_bias : {false, true})
                for (int exclusion : {0, 1})
                    for (size_t k : {size_t(1), size_t(10), size_t(100), n + 5}) {
                        const uint64_t seed = uint64_t(++cases) * 71;
                        if (!sampled(uint64_t(cases))) continue;
                        const size_t rows = 19;
                        const Dense<float> z =
                            testing::random_dense<float>(rows, n, 3, seed, -6, 6, 1e9f);
                        std::vector<float> bias(n);
                        std::mt19937_64 rng(seed);
                        for (float& v : bias) v = float(int(rng() % 200) - 100) / 50.0f;
                        const Dataset ex = testing::random_dataset(
                            rows + 3, uint32_t(n), RowShape::kUniform, false, seed + 1);
                        const TestBatch batch = testing::make_batch(ex.rows, rows, true, seed + 2);
                        DevCsr exd(dev(), ex, batch);
                        const CsrBatchView* e = exclusion ? &exd.view : nullptr;
                        DeviceArray<float> bd = dev_array(dev(), bias, "test bias");
                        const float* b = with_bias ? bd.data() : nullptr;
                        DevMat zd(dev(), z), ad(dev(), z);
                        dev().bias_activation_forward(act, b, ad.view());
                        DeviceArray<float> os(dev(), rows * k, "top scores");
                        DeviceArray<uint32_t> oi(dev(), rows * k, "top indices");
                        dev().top_k(ad.cview(), e, k, os.data(), oi.data());
                        const std::vector<float> want_s = fetch(os, rows * k);
                        const std::vector<uint32_t> want_i = fetch(oi, rows * k);
                        const TopKActivation fused{act, b};
                        dev().top_k(zd.cview(), e, k, os.data(), oi.data(), &fused);
                        const std::vector<float> got_s = fetch(os, rows * k);
                        const std::vector<uint32_t> got_i = fetch(oi, rows * k);
                        // The CPU's selection over the device's activations.
                        const Dense<float> a = ad.get(z);
                        CsrBatchView ex_host = testing::csr_view(ex, batch);
                        std::vector<float> cpu_s(rows * k);
                        std::vector<uint32_t> cpu_i(rows * k);
                        cpu_.top_k(a.cview(), exclusion ? &ex_host : nullptr, k, cpu_s.data(),
                                   cpu_i.data());
                        for (size_t i = 0; i < rows * k; ++i) {
                            ASSERT_EQ(got_i[i], want_i[i])
                                << to_string(act.kind) << " n=" << n << " k=" << k << " slot " << i;
                            ASSERT_EQ(bits(got_s[i]), bits(want_s[i])) << "slot " << i;
                            ASSERT_EQ(got_i[i], cpu_i[i]) << "slot " << i;
                            ASSERT_EQ(bits(got_s[i]), bits(cpu_s[i])) << "slot " << i;
                        }
                    }
    }
}

}  // namespace
}  // namespace sparsenet::parity
