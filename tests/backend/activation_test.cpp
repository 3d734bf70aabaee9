// bias_activation_forward, activation_backward (with and without a dropout mask) and column_sum
// against double references written here from the textbook definitions (not from the formulas).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"

namespace sparsenet {
namespace {

using testing::Dense;

using formulas::ActivationParams;

// Parameters away from the defaults, so that a formula ignoring one of them fails.
ActivationParams params(Activation kind) {
    ActivationParams p;
    p.kind = kind;
    p.slope = 0.15f;
    p.alpha = 1.6732632f;
    p.lambda = 1.0507010f;
    return p;
}

const std::vector<ActivationParams> kAll = {
    params(Activation::kSigmoid),           params(Activation::kTanh),
    params(Activation::kRectifiedLinear),   params(Activation::kLinear),
    params(Activation::kSoftMax),           params(Activation::kLeakyRectifiedLinear),
    params(Activation::kExponentialLinear), params(Activation::kScaledExponentialLinear),
    params(Activation::kSoftPlus),          params(Activation::kSoftSign)};

std::vector<ActivationParams> elementwise() {
    std::vector<ActivationParams> v;
    for (const ActivationParams& p : kAll)
        if (p.kind != Activation::kSoftMax) v.push_back(p);
    return v;
}

double ref_activate(const ActivationParams& p, double z) {
    const double slope = p.slope, alpha = p.alpha, lambda = p.lambda;
    switch (p.kind) {
        case Activation::kSigmoid:
            return 1.0 / (1.0 + std::exp(-z));
        case Activation::kTanh:
            return std::tanh(z);
        case Activation::kRectifiedLinear:
            return std::max(z, 0.0);
        case Activation::kLinear:
            return z;
        case Activation::kLeakyRectifiedLinear:
            return z > 0 ? z : slope * z;
        case Activation::kExponentialLinear:
            return z > 0 ? z : alpha * (std::exp(z) - 1.0);
        case Activation::kScaledExponentialLinear:
            return lambda * (z > 0 ? z : alpha * (std::exp(z) - 1.0));
        case Activation::kSoftPlus:
            return std::log(1.0 + std::exp(z));
        case Activation::kSoftSign:
            return z / (1.0 + std::fabs(z));
        case Activation::kSoftMax:
            break;
    }
    return std::nan("");
}

// f'(z) from the textbook derivatives, evaluated at the pre-activation z.
double ref_derivative_at(const ActivationParams& p, double z) {
    const double slope = p.slope, alpha = p.alpha, lambda = p.lambda;
    switch (p.kind) {
        case Activation::kSigmoid: {
            const double s = 1.0 / (1.0 + std::exp(-z));
            return s * (1.0 - s);
        }
        case Activation::kTanh:
            return 1.0 - std::tanh(z) * std::tanh(z);
        case Activation::kRectifiedLinear:
            return z > 0 ? 1.0 : 0.0;
        case Activation::kLinear:
            return 1.0;
        case Activation::kLeakyRectifiedLinear:
            return z > 0 ? 1.0 : slope;
        case Activation::kExponentialLinear:
            return z > 0 ? 1.0 : alpha * std::exp(z);
        case Activation::kScaledExponentialLinear:
            return lambda * (z > 0 ? 1.0 : alpha * std::exp(z));
        case Activation::kSoftPlus:
            return 1.0 / (1.0 + std::exp(-z));
        case Activation::kSoftSign:
            return 1.0 / ((1.0 + std::fabs(z)) * (1.0 + std::fabs(z)));
        case Activation::kSoftMax:
            break;
    }
    return std::nan("");
}

void check_forward(Backend& backend, const ActivationParams& act, size_t rows, size_t cols,
                   bool with_bias, uint64_t seed, double range = 4.0) {
    const float kPad = 99.0f;
    Dense<float> z = testing::random_dense<float>(rows, cols, 3, seed, -range, range, kPad);
    const Dense<float> z0 = z;
    const Dense<float> bias = testing::random_dense<float>(1, cols, 0, seed + 1);
    backend.bias_activation_forward(act, with_bias ? bias.data.data() : nullptr, z.view());
    const std::string what = std::string(to_string(act.kind)) + " rows=" + std::to_string(rows) +
                             " cols=" + std::to_string(cols) + (with_bias ? " bias" : "");
    for (size_t r = 0; r < rows; ++r) {
        std::vector<double> x(cols), want(cols);
        for (size_t c = 0; c < cols; ++c)
            x[c] = double(z0.at(r, c)) + (with_bias ? double(bias.at(0, c)) : 0.0);
        if (act.kind == Activation::kSoftMax) {
            const double mx = *std::max_element(x.begin(), x.end());
            double sum = 0;
            for (size_t c = 0; c < cols; ++c) sum += want[c] = std::exp(x[c] - mx);
            for (double& v : want) v /= sum;
        } else {
            for (size_t c = 0; c < cols; ++c) want[c] = ref_activate(act, x[c]);
        }
        double total = 0;
        for (size_t c = 0; c < cols; ++c) {
            total += z.at(r, c);
            ASSERT_TRUE(testing::near(z.at(r, c), want[c], std::fabs(want[c]) + 1.0, 2e-6, 0))
                << what << " at " << r << "," << c << " got " << z.at(r, c) << " want " << want[c];
        }
        if (act.kind == Activation::kSoftMax) {
            ASSERT_NEAR(total, 1.0, 1e-5) << what;
        }
        for (size_t c = cols; c < z.ld; ++c) ASSERT_EQ(z.at(r, c), kPad) << what;
    }
}

TEST(BiasActivationForward, MatchesReferenceOverGrid) {
    CpuBackend backend(2);
    uint64_t seed = 1;
    for (const ActivationParams& act : kAll)
        for (size_t rows : {1, 7, 64})
            for (size_t cols : {1, 5, 130})
                for (bool bias : {false, true}) {
                    check_forward(backend, act, rows, cols, bias, seed++);
                    if (HasFatalFailure()) return;
                }
}

TEST(BiasActivationForward, ParallelPath) {
    CpuBackend backend(2);
    for (const ActivationParams& act : kAll) check_forward(backend, act, 300, 257, true, 7);
}

TEST(BiasActivationForward, ParametersComeFromTheStruct) {
    CpuBackend backend(1);
    for (Activation kind : {Activation::kLeakyRectifiedLinear, Activation::kExponentialLinear,
                            Activation::kScaledExponentialLinear})
        for (float value : {0.0f, 0.5f, 2.0f}) {
            ActivationParams p = params(kind);
            p.slope = value;
            p.alpha = value;
            p.lambda = value + 1.0f;
            Dense<float> z(1, 2);
            z.at(0, 0) = -1.5f;
            z.at(0, 1) = 0.75f;
            backend.bias_activation_forward(p, nullptr, z.view());
            EXPECT_NEAR(z.at(0, 0), ref_activate(p, -1.5), 1e-6) << to_string(kind) << value;
            EXPECT_NEAR(z.at(0, 1), ref_activate(p, 0.75), 1e-6) << to_string(kind) << value;
        }
}

TEST(BiasActivationForward, SoftPlusIsFiniteForLargeInputs) {
    CpuBackend backend(1);
    Dense<float> z(1, 4);
    const float v[] = {-200.0f, -30.0f, 30.0f, 200.0f};
    for (size_t c = 0; c < 4; ++c) z.at(0, c) = v[c];
    backend.bias_activation_forward(params(Activation::kSoftPlus), nullptr, z.view());
    EXPECT_EQ(z.at(0, 0), 0.0f);
    EXPECT_NEAR(z.at(0, 1), std::exp(-30.0), 1e-18);
    EXPECT_EQ(z.at(0, 2), 30.0f);
    EXPECT_EQ(z.at(0, 3), 200.0f);
}

TEST(BiasActivationForward, SoftMaxIsStableForLargeInputs) {
    CpuBackend backend(1);
    Dense<float> z(2, 3);
    const float v[] = {1000.0f, 1001.0f, 999.0f, -1000.0f, -1000.0f, -1000.0f};
    for (size_t i = 0; i < 6; ++i) z.data[i] = v[i];
    backend.bias_activation_forward(params(Activation::kSoftMax), nullptr, z.view());
    const double e1 = std::exp(-1.0), e2 = std::exp(-2.0);
    const double s = 1 + e1 + e2;
    EXPECT_NEAR(z.at(0, 0), e1 / s, 1e-6);
    EXPECT_NEAR(z.at(0, 1), 1.0 / s, 1e-6);
    EXPECT_NEAR(z.at(0, 2), e2 / s, 1e-6);
    for (size_t c = 0; c < 3; ++c) EXPECT_NEAR(z.at(1, c), 1.0 / 3.0, 1e-6);
}

// The derivative computed from the stored output a = f(z) equals f'(z) at the pre-activation.
TEST(ActivationBackward, MatchesReferenceOverGrid) {
    CpuBackend backend(2);
    uint64_t seed = 50;
    for (const ActivationParams& act : elementwise())
        for (size_t rows : {1, 7, 64, 300})
            for (size_t cols : {1, 5, 130}) {
                // z: random pre-activations (some exact zeros, the kink of the ReLU family, which
                // the derivative-from-output rules assign to the z <= 0 side).
                Dense<float> z = testing::random_dense<float>(rows, cols, 2, seed++, -3, 3);
                z.at(0, 0) = 0.0f;
                Dense<float> a = z;
                backend.bias_activation_forward(act, nullptr, a.view());
                Dense<float> d = testing::random_dense<float>(rows, cols, 1, seed++, -2, 2, 5.0f);
                const Dense<float> d0 = d;
                backend.activation_backward(act, a.cview(), nullptr, d.view());
                for (size_t r = 0; r < rows; ++r) {
                    for (size_t c = 0; c < cols; ++c) {
                        double zz = z.at(r, c);
                        // At z == 0: the ELU family takes the z > 0 side (f' from a >= 0).
                        const bool elu_kink =
                            zz == 0.0 && (act.kind == Activation::kExponentialLinear ||
                                          act.kind == Activation::kScaledExponentialLinear);
                        if (elu_kink) zz = 1e-30;
                        const double want = double(d0.at(r, c)) * ref_derivative_at(act, zz);
                        // Float outputs near saturation lose relative precision in f'(a).
                        ASSERT_TRUE(testing::near(d.at(r, c), want, std::fabs(want), 2e-5, 2e-7))
                            << to_string(act.kind) << " at " << r << "," << c << " z=" << zz
                            << " got " << d.at(r, c) << " want " << want;
                    }
                    ASSERT_EQ(d.at(r, cols), 5.0f);
                }
            }
}

// With a dropout mask the stored activations are post-dropout; the derivative must be taken at
// the pre-dropout activation (inverted and alpha dropout), and dropped units pass no gradient.
TEST(ActivationBackward, UndoesTheDropoutBeforeTheDerivative) {
    CpuBackend backend(2);
    const testing::TestBatch batch = testing::make_batch(90, 64, true, 3);
    uint64_t seed = 900;
    for (const ActivationParams& act : elementwise())
        for (bool alpha : {false, true}) {
            Dense<float> z = testing::random_dense<float>(64, 70, 1, seed++, -3, 3);
            Dense<float> a = z;
            backend.bias_activation_forward(act, nullptr, a.view());
            DropoutMask mask;
            mask.rows = batch.view();
            mask.col_offset = 11;
            mask.params = alpha ? formulas::alpha_dropout(0.3f, 77, -1.7580993f)
                                : formulas::inverted_dropout(0.3f, 77);
            backend.dropout(mask, a.view());
            Dense<float> d = testing::random_dense<float>(64, 70, 1, seed++, -2, 2);
            const Dense<float> d0 = d;
            backend.activation_backward(act, a.cview(), &mask, d.view());
            size_t dropped = 0;
            for (size_t r = 0; r < 64; ++r)
                for (size_t c = 0; c < 70; ++c) {
                    const bool keep =
                        formulas::keep_unit(77, batch.example(r), 11 + c, mask.params.p);
                    double want = 0.0;
                    if (keep) {
                        want = double(d0.at(r, c)) * double(mask.params.scale) *
                               ref_derivative_at(act, z.at(r, c));
                    } else {
                        ++dropped;
                    }
                    ASSERT_TRUE(testing::near(d.at(r, c), want, std::fabs(want), 1e-4, 1e-6))
                        << to_string(act.kind) << (alpha ? " alpha" : " inverted") << " at " << r
                        << "," << c << " got " << d.at(r, c) << " want " << want;
                }
            EXPECT_GT(dropped, 0u);
        }
}

TEST(ActivationBackward, SoftMaxIsRejected) {
    CpuBackend backend(1);
    Dense<float> a(2, 2, 0, 0.5f), d(2, 2, 0, 1.0f);
    try {
        backend.activation_backward(params(Activation::kSoftMax), a.cview(), nullptr, d.view());
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInternal);
    }
}

// Tanh's derivative from its output, 1 - a^2, is well conditioned in float wherever it is
// evaluated: within 2^-22 of the exact value relative to itself, near |a| = 1 too, where the
// form 1 - a * a lost up to half an ulp of 1 (relative 1.5e-4 at a = 0.9998) and the CPU and a
// GPU that fuses the multiply-add disagreed (H100, 2026-11-28).
TEST(ActivationBackward, TanhDerivativeIsAccurateNearSaturation) {
    ActivationParams p;
    p.kind = Activation::kTanh;
    double worst = 0.0;
    for (float a = 0.0f; a < 1.0f; a = std::nextafter(a, 2.0f) + (a < 0.99f ? 1e-5f : 0.0f)) {
        for (float s : {a, -a}) {
            const double exact = 1.0 - double(s) * double(s);
            const double got = formulas::derivative_from_output(p, s);
            worst = std::max(worst, std::fabs(got - exact) / exact);
        }
    }
    EXPECT_LT(worst, std::ldexp(1.0, -22));
}

TEST(ActivationDouble, ForwardAndBackwardInstantiate) {
    Dense<double> z = testing::random_dense<double>(3, 4, 1, 3);
    const Dense<double> z0 = z;
    const double bias[4] = {0.1, -0.2, 0.3, 0.0};
    cpu::bias_activation_forward(params(Activation::kTanh), bias, z.mat(), 2);
    Dense<double> d(3, 4, 1, 1.0);
    cpu::activation_backward(params(Activation::kTanh), z.cmat(), nullptr, d.mat(), 2);
    for (size_t r = 0; r < 3; ++r)
        for (size_t c = 0; c < 4; ++c) {
            const double a = std::tanh(z0.at(r, c) + bias[c]);
            EXPECT_NEAR(z.at(r, c), a, 1e-15);
            EXPECT_NEAR(d.at(r, c), 1 - a * a, 1e-15);
        }
}

void check_column_sum(Backend& backend, size_t rows, size_t cols, float alpha, float beta,
                      uint64_t seed, std::vector<float>* result = nullptr) {
    const Dense<float> m = testing::random_dense<float>(rows, cols, 3, seed, -1, 1, 1e30f);
    std::vector<float> out(cols + 1, 0.25f);
    if (beta == 0.0f)
        for (size_t c = 0; c < cols; ++c) out[c] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> out0 = out;
    backend.column_sum(m.cview(), alpha, beta, out.data());
    for (size_t c = 0; c < cols; ++c) {
        double want = 0, mag = 0;
        for (size_t r = 0; r < rows; ++r) {
            want += m.at(r, c);
            mag += std::fabs(m.at(r, c));
        }
        want *= alpha;
        mag *= std::fabs(alpha);
        if (beta != 0.0f) {
            want += double(beta) * out0[c];
            mag += std::fabs(double(beta) * out0[c]);
        }
        ASSERT_TRUE(testing::near(out[c], want, mag, 1e-6, 1e-7))
            << "rows=" << rows << " cols=" << cols << " beta=" << beta << " c=" << c << " got "
            << out[c] << " want " << want;
    }
    ASSERT_EQ(out[cols], 0.25f) << "wrote past the end";
    if (result != nullptr) *result = out;
}

TEST(ColumnSum, MatchesReferenceOverGrid) {
    CpuBackend backend(2);
    uint64_t seed = 300;
    for (size_t rows : {1, 7, 64})
        for (size_t cols : {1, 5, 130})
            for (float beta : {0.0f, 1.0f}) {
                check_column_sum(backend, rows, cols, -0.5f, beta, seed++);
                if (HasFatalFailure()) return;
            }
}

TEST(ColumnSum, DeterministicAcrossThreadCounts) {
    CpuBackend one(1), two(2);
    std::vector<float> r1, r2;
    check_column_sum(one, 1000, 700, 1.0f / 1000, 1.0f, 9, &r1);
    check_column_sum(two, 1000, 700, 1.0f / 1000, 1.0f, 9, &r2);
    ASSERT_EQ(r1.size(), r2.size());
    EXPECT_EQ(0, std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(float)));
}

}  // namespace
}  // namespace sparsenet

// ---- parity: the CPU reference against the device under test (backend/parity_harness.h) ----
namespace sparsenet::parity {
namespace {

// ---- activations ----

TEST_F(CudaParity, BiasActivationForwardEveryActivation) {
    struct Shape {
        size_t rows, cols;
    };
    int cases = 0;
    for (int k = 0; k < kActivations; ++k)
        for (const Shape s :
             {Shape{1, 1}, Shape{7, 5}, Shape{64, 130}, Shape{3, 1000}, Shape{33, 4099}})
            for (bool with_bias : {false, true}) {
                const formulas::ActivationParams act = act_params(Activation(k));
                const uint64_t seed = uint64_t(++cases);
                const Dense<float> z0 =
                    testing::random_dense<float>(s.rows, s.cols, 3, seed, -4, 4, kPad);
                std::vector<float> bias(s.cols);
                std::mt19937_64 rng(seed);
                for (float& v : bias) v = float(int(rng() % 200) - 100) / 50.0f;
                DevMat zd(dev(), z0);
                DeviceArray<float> bd = dev_array(dev(), bias, "test bias");
                dev().bias_activation_forward(act, with_bias ? bd.data() : nullptr, zd.view());
                Dense<float> want = z0;
                cpu_.bias_activation_forward(act, with_bias ? bias.data() : nullptr, want.view());
                ASSERT_TRUE(close_dense(want, zd.get(z0), 1e-5, 0.05))
                    << to_string(Activation(k)) << " " << s.rows << "x" << s.cols
                    << (with_bias ? " bias" : "");
            }
}

TEST_F(CudaParity, ActivationBackwardWithAndWithoutDropoutMask) {
    int cases = 0;
    for (int k = 0; k < kActivations; ++k) {
        const Activation kind = Activation(k);
        const formulas::ActivationParams act = act_params(kind);
        if (kind == Activation::kSoftMax) {
            Dense<float> a(2, 3), d(2, 3);
            DevMat ad(dev(), a), dd(dev(), d);
            try {
                dev().activation_backward(act, ad.cview(), nullptr, dd.view());
                FAIL() << "SoftMax must be refused";
            } catch (const Error& e) {
                EXPECT_EQ(e.category(), ErrorCategory::kInternal);
            }
            continue;
        }
        for (size_t cols : {1, 5, 130, 1001})
            for (int mask_kind : {0, 1, 2})  // none, inverted, alpha (the ELU/SELU kind)
                for (bool permuted : {false, true}) {
                    const uint64_t seed = uint64_t(++cases) * 3;
                    const size_t rows = 37;
                    Dense<float> a = testing::random_dense<float>(rows, cols, 2, seed, -3, 3, kPad);
                    cpu_.bias_activation_forward(act, nullptr, a.view());  // valid outputs
                    const TestBatch batch = testing::make_batch(rows + 10, rows, permuted, seed);
                    DropoutMask mask;
                    mask.rows = batch.view();
                    mask.col_offset = permuted ? 9 : 0;
                    if (mask_kind == 1) mask.params = formulas::inverted_dropout(0.3f, seed);
                    if (mask_kind == 2)
                        mask.params = formulas::alpha_dropout(0.2f, seed, -act.lambda * act.alpha);
                    if (mask_kind != 0) cpu_.dropout(mask, a.view());  // as forward left them
                    const Dense<float> d0 =
                        testing::random_dense<float>(rows, cols, 4, seed + 1, -1, 1, kPad);
                    DeviceArray<uint32_t> rows_d = dev_array(dev(), batch.rows, "mask rows");
                    DropoutMask dmask = mask;
                    dmask.rows.rows = batch.rows.empty() ? nullptr : rows_d.data();
                    DevMat ad(dev(), a), dd(dev(), d0);
                    dev().activation_backward(act, ad.cview(), mask_kind ? &dmask : nullptr,
                                              dd.view());
                    Dense<float> want = d0;
                    cpu_.activation_backward(act, a.cview(), mask_kind ? &mask : nullptr,
                                             want.view());
                    ASSERT_TRUE(close_dense(want, dd.get(d0), 1e-5, 0.05))
                        << to_string(kind) << " cols=" << cols << " mask=" << mask_kind
                        << (permuted ? " permuted" : "");
                }
    }
}

}  // namespace
}  // namespace sparsenet::parity
