// The BF16 copies the producing ops write beside their FP32 outputs (Backend's out_bf16, issue
// 46): bias_activation_forward, bias_activation_dropout, activation_backward,
// activation_backward_column_sum, output_delta and output_epilogue. Each writes, for every
// element it writes, formulas::bf16_bits of the FP32 value it wrote (bit for bit what round_bf16
// of the output gives), at the same offset (the output's ld), leaves the padding columns
// unwritten, and writes the same FP32 values as without the copy. On the CPU here; the
// CudaParity twin checks the same of the device's kernels against the device's own FP32 output
// (skipped without a GPU).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"
#include "formulas/dropout.h"
#include "formulas/loss.h"
#include "formulas/precision.h"

namespace sparsenet::parity {
namespace {

constexpr uint16_t kUnwritten = 0x5555;  // a BF16 value no producer writes here

// One producer call: runs the op on backend `be` from fresh copies of its inputs, with the BF16
// copy `copy` (nullable), and returns its FP32 output (the matrix the copy mirrors).
struct ProducerCase {
    std::string name;
    size_t rows = 0, cols = 0, ld = 0;
    std::function<Dense<float>(Backend& be, uint16_t* copy)> run;
};

formulas::ActivationParams act_of(Activation kind) {
    formulas::ActivationParams a;
    a.kind = kind;
    return a;
}

std::vector<ProducerCase> producer_cases(size_t rows, size_t cols, size_t pad) {
    std::vector<ProducerCase> cases;
    const size_t ld = cols + pad;
    // Shared inputs (host): pre-activations, activations in (0, 1), upstream gradients, a bias,
    // sparse targets of a batch of `rows` examples (rows 3 .. 3 + rows of the dataset).
    const Dense<float> z = testing::random_dense<float>(rows, cols, pad, 11, -3, 3, 0.0f);
    const Dense<float> a = testing::random_dense<float>(rows, cols, pad, 12, 0.02, 0.98, 0.0f);
    const Dense<float> d = testing::random_dense<float>(rows, cols, pad, 13, -1, 1, 0.0f);
    std::vector<float> bias(cols);
    for (size_t j = 0; j < cols; ++j) bias[j] = 0.01f * float(j % 17) - 0.08f;
    const auto targets = std::make_shared<Dataset>(
        testing::random_dataset(rows + 3, uint32_t(cols), RowShape::kPowerLaw, true, 14, "t"));
    const auto batch = std::make_shared<TestBatch>(testing::make_batch(rows + 3, rows, false, 0));
    DropoutMask mask;
    mask.params = formulas::inverted_dropout(0.5f, 99);
    mask.rows.first_row = 3;
    mask.rows.batch = rows;
    mask.col_offset = 5;

    for (Activation k : {Activation::kSigmoid, Activation::kTanh, Activation::kRectifiedLinear,
                         Activation::kSoftMax}) {
        cases.push_back({std::string("bias_activation_forward ") + to_string(k), rows, cols, ld,
                         [=](Backend& be, uint16_t* copy) {
                             DevMat zd(be, z);
                             DeviceArray<float> b = dev_array(be, bias, "bias");
                             be.bias_activation_forward(act_of(k), b.data(), zd.view(), copy);
                             return zd.get(z);
                         }});
    }
    for (Activation k : {Activation::kSigmoid, Activation::kSoftMax}) {
        for (float p : {0.5f, 0.0f}) {
            DropoutMask m = mask;
            m.params = formulas::inverted_dropout(p, 99);
            cases.push_back(
                {std::string("bias_activation_dropout ") + to_string(k) + " p " + std::to_string(p),
                 rows, cols, ld, [=](Backend& be, uint16_t* copy) {
                     DevMat zd(be, z);
                     DeviceArray<float> b = dev_array(be, bias, "bias");
                     be.bias_activation_dropout(act_of(k), b.data(), m, zd.view(), copy);
                     return zd.get(z);
                 }});
        }
    }
    for (bool masked : {false, true}) {
        for (bool fused : {false, true}) {
            cases.push_back(
                {std::string(fused ? "activation_backward_column_sum" : "activation_backward") +
                     (masked ? " masked" : ""),
                 rows, cols, ld, [=](Backend& be, uint16_t* copy) {
                     DevMat ad(be, a), dd(be, d);
                     const DropoutMask* mp = masked ? &mask : nullptr;
                     if (fused) {
                         DeviceArray<float> sums(be, cols, "column sums");
                         be.activation_backward_column_sum(act_of(Activation::kSigmoid), ad.cview(),
                                                           mp, dd.view(), sums.data(), copy);
                     } else {
                         be.activation_backward(act_of(Activation::kSigmoid), ad.cview(), mp,
                                                dd.view(), copy);
                     }
                     return dd.get(d);
                 }});
        }
    }
    struct Out {
        Activation act;
        ErrorFunction loss;
        bool multinomial;
    };
    for (Out o : {Out{Activation::kSigmoid, ErrorFunction::kScaledMarginalCrossEntropy, false},
                  Out{Activation::kSoftMax, ErrorFunction::kCrossEntropy, true},
                  Out{Activation::kSoftMax, ErrorFunction::kL2, false}}) {
        for (bool epilogue : {false, true}) {
            for (bool over : {false, true}) {  // the delta written over a (or z)
                cases.push_back(
                    {std::string(epilogue ? "output_epilogue " : "output_delta ") +
                         to_string(o.act) + "/" + to_string(o.loss) + (over ? " over a" : ""),
                     rows, cols, ld, [=](Backend& be, uint16_t* copy) {
                         formulas::LossParams loss;
                         loss.kind = o.loss;
                         loss.multinomial = o.multinomial;
                         DevCsr t(be, *targets, *batch);
                         DevMat in(be, epilogue ? z : a), dd(be, d);
                         DeviceArray<double> sum(be, 1, "loss");
                         const double zero = 0.0;
                         sum.upload(&zero, 1);
                         DeviceArray<float> norms(be, rows, "row norms");
                         DeviceArray<float> b = dev_array(be, bias, "bias");
                         const MatrixView delta = over ? in.view() : dd.view();
                         if (epilogue) {
                             be.output_epilogue(loss, act_of(o.act), b.data(), in.view(), t.view,
                                                0.25f, delta, sum.data(), norms.data(), copy);
                         } else {
                             be.output_delta(loss, act_of(o.act), in.cview(), t.view, 0.25f, delta,
                                             sum.data(), norms.data(), copy);
                         }
                         return over ? in.get(d) : dd.get(d);
                     }});
            }
        }
    }
    return cases;
}

std::vector<uint32_t> bits_of(const Dense<float>& m) {
    std::vector<uint32_t> out(m.data.size());
    std::memcpy(out.data(), m.data.data(), out.size() * sizeof(float));
    return out;
}

// Every case on `be`: the copy is the rounding of the FP32 output it wrote beside it, its padding
// untouched, and the FP32 output the same bits as the op's without a copy.
void expect_copies_are_the_rounding(Backend& be, size_t rows, size_t cols, size_t pad) {
    for (const ProducerCase& c : producer_cases(rows, cols, pad)) {
        const size_t n = c.rows * c.ld;
        DeviceArray<uint16_t> copy =
            dev_array(be, std::vector<uint16_t>(n, kUnwritten), "BF16 copy");
        const Dense<float> with = c.run(be, copy.data());
        const Dense<float> without = c.run(be, nullptr);
        EXPECT_EQ(bits_of(with), bits_of(without)) << c.name << ": the FP32 output changed";
        const std::vector<uint16_t> got = fetch(copy, n);
        size_t wrong = 0, padding_written = 0;
        for (size_t r = 0; r < c.rows; ++r) {
            for (size_t j = 0; j < c.ld; ++j) {
                const uint16_t v = got[r * c.ld + j];
                if (j < c.cols) {
                    wrong += v != formulas::bf16_bits(with.at(r, j));
                } else {
                    padding_written += v != kUnwritten;
                }
            }
        }
        EXPECT_EQ(wrong, 0u) << c.name << ": values not the rounding of the FP32 output";
        EXPECT_EQ(padding_written, 0u) << c.name << ": padding written";
    }
}

TEST(Bf16ProducerCopies, EachProducerWritesTheRoundingOfItsOutputAndNothingElse) {
    CpuBackend cpu(2);
    expect_copies_are_the_rounding(cpu, 9, 37, 11);
    expect_copies_are_the_rounding(cpu, 1, 5, 0);  // one row, no padding
}

// The device's kernels (activation_forward, softmax_forward, activation_dropout, the SoftMax
// dropout's round_bf16 pass, activation_backward(_masked), backward_column_partial,
// output_delta's element-wise and epilogue paths) against the device's own FP32 output: rows
// of 4,500 units cross output_delta's 4,096-column segments.
TEST_F(CudaParity, ProducersWriteTheBf16OfTheirOutputBitForBit) {
    expect_copies_are_the_rounding(dev(), 9, 37, 11);
    expect_copies_are_the_rounding(dev(), 5, 4500, 12);
}

}  // namespace
}  // namespace sparsenet::parity
