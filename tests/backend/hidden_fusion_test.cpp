// The hidden-layer fusions of a training step (issue 33): bias_activation_dropout against
// bias_activation_forward then dropout, and activation_backward_column_sum against
// activation_backward then column_sum(d, 1, 0). Same formulas in the same order (the column
// sums in double over the rows in increasing order, as column_sum): bit for bit on the CPU, for
// every element-wise activation, with and without a mask (inverted and alpha dropout), padded
// leading dimensions and 1 and 2 threads. On a device the parity test compares them with the CPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/dropout.h"

namespace sparsenet::parity {
namespace {

struct HiddenCase {
    Activation act;
    size_t rows = 11, n = 130, pad = 3;
    float p = 0.3f;  // 0: no mask
    bool with_bias = true;
    uint64_t seed = 1;
    std::string name() const {
        return std::string(to_string(act)) + " n=" + std::to_string(n) + " p=" + std::to_string(p) +
               (with_bias ? "" : " no-bias");
    }
};

std::vector<HiddenCase> hidden_grid() {
    std::vector<HiddenCase> v;
    uint64_t k = 0;
    for (int a = 0; a < kActivations; ++a) {
        if (Activation(a) == Activation::kSoftMax) continue;  // refused on hidden layers
        for (size_t n : {5, 130, 1000})
            for (float p : {0.0f, 0.3f}) {
                HiddenCase c;
                c.act = Activation(a);
                c.n = n;
                c.rows = n == 1000 ? 9 : 37;
                c.p = p;
                c.with_bias = ++k % 3 != 0;
                c.seed = k * 17;
                v.push_back(c);
            }
    }
    return v;
}

DropoutMask mask_of(const HiddenCase& c, const BatchRows& rows) {
    DropoutMask m;
    // Alpha dropout on the ELU family (as the engine: Network::Impl::dropout_mask).
    m.params = c.act == Activation::kExponentialLinear ? formulas::alpha_dropout(c.p, c.seed, -0.8f)
               : c.act == Activation::kScaledExponentialLinear
                   ? formulas::alpha_dropout(c.p, c.seed, -1.1f * 0.8f)
                   : formulas::inverted_dropout(c.p, c.seed);
    m.rows = rows;
    m.col_offset = 7;
    return m;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_fused_equals_two_ops(Backend& be, const HiddenCase& c) {
    const TestBatch batch = testing::make_batch(c.rows + 5, c.rows, true, c.seed);
    DeviceArray<uint32_t> rows = dev_array(be, batch.rows, "mask rows");  // backend memory
    BatchRows rows_view = batch.view();
    rows_view.rows = rows.data();
    const DropoutMask mask = mask_of(c, rows_view);
    const formulas::ActivationParams act = act_params(c.act);
    const Dense<float> z0 = testing::random_dense<float>(c.rows, c.n, c.pad, c.seed, -3, 3, kPad);
    std::vector<float> bias_host(c.n);
    for (size_t j = 0; j < c.n; ++j) bias_host[j] = float(int(j % 13) - 6) / 4.0f;
    DeviceArray<float> bias = dev_array(be, bias_host, "test bias");
    const float* b = c.with_bias ? bias.data() : nullptr;

    // Forward.
    DevMat z1(be, z0), z2(be, z0);
    be.bias_activation_forward(act, b, z1.view());
    if (c.p > 0.0f) be.dropout(mask, z1.view());
    be.bias_activation_dropout(act, b, c.p > 0.0f ? mask : DropoutMask{}, z2.view());
    const Dense<float> a = z1.get(z0);
    EXPECT_TRUE(same_bits(a.data, z2.get(z0).data)) << c.name() << ": forward";

    // Backward from those activations.
    const Dense<float> d0 =
        testing::random_dense<float>(c.rows, c.n, c.pad, c.seed + 1, -1, 1, kPad);
    DevMat ad(be, a), d1(be, d0), d2(be, d0);
    DeviceArray<float> s1(be, c.n, "sums"), s2(be, c.n, "sums");
    const DropoutMask* m = c.p > 0.0f ? &mask : nullptr;
    be.activation_backward(act, ad.cview(), m, d1.view());
    be.column_sum(d1.cview(), 1.0f, 0.0f, s1.data());
    be.activation_backward_column_sum(act, ad.cview(), m, d2.view(), s2.data());
    EXPECT_TRUE(same_bits(d1.get(d0).data, d2.get(d0).data)) << c.name() << ": deltas";
    EXPECT_TRUE(same_bits(fetch(s1, c.n), fetch(s2, c.n))) << c.name() << ": column sums";
}

TEST(HiddenFusion, EachFusedOpEqualsItsTwoOpsBitForBit) {
    for (int threads : {1, 2}) {
        CpuBackend cpu(threads);
        for (const HiddenCase& c : hidden_grid()) expect_fused_equals_two_ops(cpu, c);
    }
}

// ---- on the device (skipped without a GPU) ----

TEST_F(CudaParity, HiddenFusionsEqualTheirTwoOps) {
    uint64_t k = 0;
    for (const HiddenCase& c : hidden_grid()) {
        if (!sampled(++k)) continue;
        expect_fused_equals_two_ops(dev(), c);
    }
}

}  // namespace
}  // namespace sparsenet::parity
