// DeltaBoost: the output delta at units with a nonzero target is multiplied by boost_one, at
// the others by boost_zero; the loss is not boosted. Checked against the unboosted op, unit by
// unit, and through the config parser.
#include <gtest/gtest.h>

#include <random>

#include "backend/backend.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"

namespace sparsenet {
namespace {

TEST(DeltaBoost, ScalesDeltasOfNonzeroAndZeroTargetsAndNotTheLoss) {
    auto cpu = make_backend("cpu", 1);
    const size_t rows = 3, n = 7;
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> u(0.05f, 0.95f);
    std::vector<float> a(rows * n);
    for (float& x : a) x = u(rng);
    // Row 0: targets at 1 and 4 (value 1); row 1: none; row 2: at 6 with value 0 (stored zero).
    const std::vector<uint64_t> offsets = {0, 2, 2, 3};
    const std::vector<uint32_t> indices = {1, 4, 6};
    const std::vector<float> values = {1.0f, 1.0f, 0.0f};
    CsrBatchView t;
    t.offsets = offsets.data();
    t.indices = indices.data();
    t.values = values.data();
    t.batch = BatchRows{nullptr, 0, rows};
    t.cols = n;
    formulas::ActivationParams act;
    act.kind = Activation::kSigmoid;
    for (ErrorFunction kind : {ErrorFunction::kL2, ErrorFunction::kCrossEntropy,
                               ErrorFunction::kScaledMarginalCrossEntropy}) {
        formulas::LossParams plain;
        plain.kind = kind;
        formulas::LossParams boosted = plain;
        boosted.boost_one = 30.0f;
        boosted.boost_zero = 0.5f;
        std::vector<float> d0(rows * n), d1(rows * n);
        double l0 = 0, l1 = 0;
        cpu->output_delta(plain, act, {a.data(), rows, n, n}, t, 0.25f, {d0.data(), rows, n, n},
                          &l0);
        cpu->output_delta(boosted, act, {a.data(), rows, n, n}, t, 0.25f, {d1.data(), rows, n, n},
                          &l1);
        for (size_t r = 0; r < rows; ++r) {
            for (size_t j = 0; j < n; ++j) {
                const bool positive = (r == 0 && (j == 1 || j == 4));
                const float factor = positive ? 30.0f : 0.5f;
                EXPECT_FLOAT_EQ(d1[r * n + j], factor * d0[r * n + j]) << r << "," << j;
            }
        }
        EXPECT_EQ(l1, l0);
    }
}

TEST(DeltaBoost, ConfigKeysRangesAndSoftMaxRefusal) {
    auto net = [](const std::string& boost, const std::string& out_act) {
        return R"({ "Version": 0.8, "DeltaBoost": )" + boost + R"(, "Layers": [
          {"Name": "In", "Kind": "Input", "N": 10, "DataSet": "x", "Sparse": true},
          {"Name": "Out", "Kind": "Output", "N": 10, "DataSet": "y", "Activation": ")" +
               out_act + R"("}]})";
    };
    const NetworkConfig c = NetworkConfig::from_json(net(R"({"one": 30, "zero": 1})", "Sigmoid"));
    EXPECT_EQ(c.delta_boost_one, 30.0f);
    EXPECT_EQ(c.delta_boost_zero, 1.0f);
    EXPECT_EQ(NetworkConfig::from_json(c.to_json()), c);
    EXPECT_EQ(NetworkConfig::from_json(net(R"({"zero": 0.25})", "Sigmoid")).delta_boost_one, 1.0f);
    EXPECT_THROW(NetworkConfig::from_json(net(R"({"one": -1})", "Sigmoid")), Error);
    EXPECT_THROW(NetworkConfig::from_json(net(R"({"two": 1})", "Sigmoid")), Error);
    try {
        NetworkConfig::from_json(net(R"({"one": 2})", "SoftMax"));
        ADD_FAILURE() << "DeltaBoost with SoftMax accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("DeltaBoost"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace sparsenet
