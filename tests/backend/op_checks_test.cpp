// Validate once (src/backend/backend_ops.cpp): every op of the table, called with arguments that
// disagree, is refused with the same Error(kInternal) "<op>: <what>" on every available backend,
// before the implementation touches any memory (the views below point at a small host buffer,
// or nowhere, and the call must throw before reading it). Backends: the CPU always; CUDA where
// a GPU is present (skip without one, fail under SPARSENET_REQUIRE_CUDA=1 or with a GPU that
// cannot be used: support/cuda_test_policy.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "sparsenet/error.h"
#include "support/cuda_test_policy.h"

namespace sparsenet {
namespace {

// Never read or written: every call below throws before it would be.
float g_unused[64];

MatrixView mat(size_t rows, size_t cols, size_t ld) {
    return {g_unused, rows, cols, ld};
}
MatrixView mat(size_t rows, size_t cols) {
    return mat(rows, cols, cols);
}
ConstMatrixView cmat(size_t rows, size_t cols) {
    return mat(rows, cols);
}

CsrBatchView csr(size_t batch, uint32_t cols) {
    CsrBatchView x;
    x.batch.batch = batch;
    x.cols = cols;
    return x;
}

SparseRowGrad row_grad(size_t cols) {
    SparseRowGrad g;
    g.cols = cols;
    g.capacity = 4;
    return g;
}

DropoutMask mask(size_t batch, float p) {
    DropoutMask m;
    m.params.p = p;
    m.rows.batch = batch;
    return m;
}

formulas::ActivationParams act(Activation kind) {
    formulas::ActivationParams a;
    a.kind = kind;
    return a;
}

formulas::OptimizerStep adam() {
    formulas::OptimizerStep s;
    s.kind = OptimizerKind::kAdam;  // two state slots
    return s;
}

struct BadCall {
    std::string expected;  // the whole message
    std::function<void(Backend&)> call;
};

// Every op at least once, every check at least once.
std::vector<BadCall> bad_calls() {
    const auto sigmoid = act(Activation::kSigmoid);
    const formulas::LossParams loss;
    float state[8] = {};
    const DropoutMask batch2 = mask(2, 0.5f);
    const CsrBatchView exclude2 = csr(2, 4);
    return {
        {"csr_matmul: rows of z != batch size",
         [](Backend& b) { b.csr_matmul(csr(2, 3), {}, cmat(3, 4), mat(3, 4), 0.0f); }},
        {"csr_matmul: columns of w != columns of z",
         [](Backend& b) { b.csr_matmul(csr(2, 3), {}, cmat(3, 5), mat(2, 4), 0.0f); }},
        {"csr_matmul: rows of w < input width",
         [](Backend& b) { b.csr_matmul(csr(2, 3), {}, cmat(2, 4), mat(2, 4), 0.0f); }},
        {"csr_matmul: ld of z < its columns",
         [](Backend& b) { b.csr_matmul(csr(2, 3), {}, cmat(3, 4), mat(2, 4, 3), 0.0f); }},
        {"csr_weight_grad: rows of dz != batch size",
         [](Backend& b) { b.csr_weight_grad(csr(2, 3), {}, cmat(3, 4), 1.0f, row_grad(4)); }},
        {"csr_weight_grad: gradient width != columns of dz",
         [](Backend& b) { b.csr_weight_grad(csr(2, 3), {}, cmat(2, 4), 1.0f, row_grad(5)); }},
        {"gemm: rows of op(a) != rows of c",
         [](Backend& b) { b.gemm(false, false, 1, cmat(3, 2), cmat(2, 4), 0, mat(2, 4)); }},
        {"gemm: inner dimensions of op(a), op(b) differ",
         [](Backend& b) { b.gemm(false, false, 1, cmat(2, 3), cmat(2, 4), 0, mat(2, 4)); }},
        {"gemm: columns of op(b) != columns of c",
         [](Backend& b) { b.gemm(false, true, 1, cmat(2, 3), cmat(5, 3), 0, mat(2, 4)); }},
        {"gemm: an operand held only in BF16 outside Precision::kBf16",
         [](Backend& b) {
             static const uint16_t copy[12] = {};
             const ConstMatrixView only_bf16(nullptr, 3, 4, 4, false, copy);
             b.gemm(false, false, 1, cmat(2, 3), only_bf16, 0, mat(2, 4));
         }},
        {"round_bf16: ld of m < its columns",
         [](Backend& b) {
             uint16_t out[12];
             b.round_bf16(mat(3, 4, 3), out);
         }},
        // A producer's BF16 copy over its own FP32 values (issue 46).
        {"bias_activation_forward: the BF16 copy overlaps the FP32 values",
         [sigmoid](Backend& b) {
             b.bias_activation_forward(sigmoid, nullptr, mat(2, 4),
                                       reinterpret_cast<uint16_t*>(g_unused) + 3);
         }},
        {"bias_activation_dropout: the BF16 copy overlaps the FP32 values",
         [sigmoid](Backend& b) {
             b.bias_activation_dropout(sigmoid, nullptr, mask(2, 0.5f), mat(2, 4),
                                       reinterpret_cast<uint16_t*>(g_unused));
         }},
        {"activation_backward: the BF16 copy overlaps the FP32 values",
         [sigmoid](Backend& b) {
             b.activation_backward(sigmoid, ConstMatrixView(g_unused + 16, 2, 4, 4), nullptr,
                                   mat(2, 4), reinterpret_cast<uint16_t*>(g_unused) + 1);
         }},
        {"activation_backward_column_sum: the BF16 copy overlaps the FP32 values",
         [sigmoid](Backend& b) {
             b.activation_backward_column_sum(sigmoid, cmat(2, 4), nullptr,
                                              MatrixView{g_unused + 16, 2, 4, 4}, g_unused + 40,
                                              reinterpret_cast<uint16_t*>(g_unused));
         }},
        {"output_delta: the BF16 copy overlaps the FP32 values",
         [sigmoid, loss](Backend& b) {
             b.output_delta(loss, sigmoid, cmat(2, 4), csr(2, 4), 1.0f,
                            MatrixView{g_unused + 16, 2, 4, 4}, nullptr, nullptr,
                            reinterpret_cast<uint16_t*>(g_unused + 18));
         }},
        {"output_epilogue: the BF16 copy overlaps the FP32 values",
         [sigmoid, loss](Backend& b) {
             b.output_epilogue(loss, sigmoid, nullptr, mat(2, 4), csr(2, 4), 1.0f, mat(2, 4),
                               nullptr, nullptr, reinterpret_cast<uint16_t*>(g_unused + 7));
         }},
        {"gemm: ld < cols",
         [](Backend& b) { b.gemm(false, false, 1, cmat(2, 3), cmat(3, 4), 0, mat(2, 4, 2)); }},
        {"bias_activation_forward: ld of z < its columns",
         [sigmoid](Backend& b) { b.bias_activation_forward(sigmoid, nullptr, mat(2, 4, 1)); }},
        {"activation_backward: SoftMax is applied by output_delta, not here",
         [](Backend& b) {
             b.activation_backward(act(Activation::kSoftMax), cmat(2, 4), nullptr, mat(2, 4));
         }},
        {"activation_backward: shapes of a and d differ",
         [sigmoid](Backend& b) { b.activation_backward(sigmoid, cmat(2, 4), nullptr, mat(2, 3)); }},
        {"activation_backward: mask batch size != rows of d",
         [sigmoid](Backend& b) {
             const DropoutMask m = mask(3, 0.5f);
             b.activation_backward(sigmoid, cmat(2, 4), &m, mat(2, 4));
         }},
        {"column_sum: ld of m < its columns",
         [](Backend& b) { b.column_sum(ConstMatrixView(mat(2, 4, 2)), 1, 0, g_unused); }},
        {"dropout: mask batch size != rows of m",
         [batch2](Backend& b) { b.dropout(batch2, mat(3, 4)); }},
        {"output_delta: shapes of a and delta differ",
         [sigmoid, loss](Backend& b) {
             b.output_delta(loss, sigmoid, cmat(2, 4), csr(2, 4), 1, mat(2, 5), nullptr);
         }},
        {"output_delta: target batch size != rows of a",
         [sigmoid, loss](Backend& b) {
             b.output_delta(loss, sigmoid, cmat(2, 4), csr(3, 4), 1, mat(2, 4), nullptr);
         }},
        {"output_delta: target width > columns of a",
         [sigmoid, loss](Backend& b) {
             b.output_delta(loss, sigmoid, cmat(2, 4), csr(2, 5), 1, mat(2, 4), nullptr);
         }},
        {"bias_activation_dropout: mask batch size != rows of z",
         [sigmoid](Backend& b) {
             b.bias_activation_dropout(sigmoid, nullptr, mask(3, 0.5f), mat(2, 4));
         }},
        {"bias_activation_dropout: ld of z < its columns",
         [sigmoid](Backend& b) {
             b.bias_activation_dropout(sigmoid, nullptr, mask(2, 0.5f), mat(2, 4, 3));
         }},
        {"activation_backward_column_sum: SoftMax is applied by output_delta, not here",
         [](Backend& b) {
             b.activation_backward_column_sum(act(Activation::kSoftMax), cmat(2, 4), nullptr,
                                              mat(2, 4), g_unused);
         }},
        {"activation_backward_column_sum: shapes of a and d differ",
         [sigmoid](Backend& b) {
             b.activation_backward_column_sum(sigmoid, cmat(2, 4), nullptr, mat(2, 3), g_unused);
         }},
        {"activation_backward_column_sum: mask batch size != rows of d",
         [sigmoid](Backend& b) {
             const DropoutMask m = mask(3, 0.5f);
             b.activation_backward_column_sum(sigmoid, cmat(2, 4), &m, mat(2, 4), g_unused);
         }},
        {"output_epilogue: shapes of z and delta differ",
         [sigmoid, loss](Backend& b) {
             b.output_epilogue(loss, sigmoid, nullptr, mat(2, 4), csr(2, 4), 1, mat(2, 5), nullptr);
         }},
        {"output_epilogue: target batch size != rows of z",
         [sigmoid, loss](Backend& b) {
             b.output_epilogue(loss, sigmoid, nullptr, mat(2, 4), csr(3, 4), 1, mat(2, 4), nullptr);
         }},
        {"output_epilogue: target width > columns of z",
         [sigmoid, loss](Backend& b) {
             b.output_epilogue(loss, sigmoid, nullptr, mat(2, 4), csr(2, 5), 1, mat(2, 4), nullptr);
         }},
        {"output_epilogue: ld of z < its columns",
         [sigmoid, loss](Backend& b) {
             b.output_epilogue(loss, sigmoid, nullptr, mat(2, 4, 3), csr(2, 4), 1, mat(2, 4),
                               nullptr);
         }},
        {"sparseness_penalty: shapes of a and delta differ",
         [](Backend& b) { b.sparseness_penalty(0.05f, 1, cmat(2, 4), 1, mat(3, 4), nullptr); }},
        {"normalize_rows: ld of m < its columns",
         [](Backend& b) { b.normalize_rows(1, mat(2, 4, 3)); }},
        {"normalize_columns: ld of w < its columns",
         [](Backend& b) { b.normalize_columns(1, mat(2, 4, 3)); }},
        {"row_max: ld of m < its columns",
         [](Backend& b) { b.row_max(ConstMatrixView(mat(2, 4, 3)), g_unused); }},
        {"exp_rows: ld of m < its columns",
         [](Backend& b) { b.exp_rows(g_unused, mat(2, 4, 3), g_unused); }},
        {"divide_rows: ld of m < its columns",
         [](Backend& b) { b.divide_rows(g_unused, mat(2, 4, 3)); }},
        {"row_sum_squares: ld of m < its columns",
         [](Backend& b) { b.row_sum_squares(ConstMatrixView(mat(2, 4, 3)), g_unused); }},
        {"clip_rows: ld of m < its columns",
         [](Backend& b) { b.clip_rows(1, g_unused, mat(2, 4, 3)); }},
        {"sum_squares: ld of a part < its columns",
         [](Backend& b) {
             b.sum_squares({cmat(2, 4), ConstMatrixView(mat(2, 4, 3))}, g_unused);
         }},
        {"sum_squares: no output for the parts",
         [](Backend& b) { b.sum_squares({cmat(2, 4)}, nullptr); }},
        {"add_matrix: shapes of x and y differ",
         [](Backend& b) { b.add_matrix(1, cmat(2, 4), 0, mat(4, 2)); }},
        {"scatter_rows: gradient width != dense width",
         [](Backend& b) { b.scatter_rows(row_grad(3), 0, mat(2, 4)); }},
        {"optimizer_step: shapes of w and g differ",
         [state](Backend& b) mutable {
             b.optimizer_step(adam(), mat(2, 4), cmat(2, 3), state, state);
         }},
        {"optimizer_step: optimizer state slot 2 is null",
         [state](Backend& b) mutable {
             b.optimizer_step(adam(), mat(2, 4), cmat(2, 4), state, nullptr);
         }},
        {"optimizer_step_rows: gradient width != weight width",
         [state](Backend& b) mutable {
             b.optimizer_step_rows(adam(), mat(2, 4), row_grad(3), state, state,
                                   SparseUpdate::kExact);
         }},
        {"optimizer_step_rows: optimizer state slot 1 is null",
         [state](Backend& b) mutable {
             b.optimizer_step_rows(adam(), mat(2, 4), row_grad(4), nullptr, state,
                                   SparseUpdate::kLazy);
         }},
        {"optimizer_step_rows: a row clock needs an exact Momentum or Nesterov step",
         [state](Backend& b) mutable {
             uint32_t clock[2] = {0, 0};
             b.optimizer_step_rows(adam(), mat(2, 4), row_grad(4), state, state,
                                   SparseUpdate::kExact, RowClock{clock, 1});
         }},
        {"sparse_step: rows of dz != batch size",
         [state](Backend& b) mutable {
             b.sparse_step(csr(2, 3), {}, cmat(3, 4), 1.0f, adam(), mat(3, 4), row_grad(4), state,
                           state, SparseUpdate::kLazy);
         }},
        {"sparse_step: gradient width != weight width",
         [state](Backend& b) mutable {
             b.sparse_step(csr(2, 3), {}, cmat(2, 4), 1.0f, adam(), mat(3, 5), row_grad(4), state,
                           state, SparseUpdate::kLazy);
         }},
        {"sparse_step: rows of w < input width",
         [state](Backend& b) mutable {
             b.sparse_step(csr(2, 3), {}, cmat(2, 4), 1.0f, adam(), mat(2, 4), row_grad(4), state,
                           state, SparseUpdate::kLazy);
         }},
        {"sparse_step: the every-row exact update is not a touched-rows step",
         [state](Backend& b) mutable {
             b.sparse_step(csr(2, 3), {}, cmat(2, 4), 1.0f, adam(), mat(3, 4), row_grad(4), state,
                           state, SparseUpdate::kExact);
         }},
        {"sparse_step: a row clock needs an exact Momentum or Nesterov step",
         [state](Backend& b) mutable {
             uint32_t clock[3] = {0, 0, 0};
             b.sparse_step(csr(2, 3), {}, cmat(2, 4), 1.0f, adam(), mat(3, 4), row_grad(4), state,
                           state, SparseUpdate::kExact, RowClock{clock, 1});
         }},
        {"catch_up_rows: only Momentum and Nesterov without L1 have a closed-form catch-up",
         [state](Backend& b) mutable {
             uint32_t clock[2] = {0, 0};
             b.catch_up_rows(adam(), mat(2, 4), nullptr, state, RowClock{clock, 1});
         }},
        {"top_k: exclusion batch size != rows of scores",
         [exclude2](Backend& b) {
             uint32_t ids[4];
             b.top_k(cmat(3, 4), &exclude2, 1, g_unused, ids);
         }},
    };
}

// The ops of the table, by name, as the calls above cover them.
TEST(OpChecks, EveryOpOfTheTableHasABadCall) {
    std::vector<std::string> covered;
    for (const BadCall& c : bad_calls())
        covered.push_back(c.expected.substr(0, c.expected.find(':')));
    for (int op = 0; op <= int(Op::kRoundBf16); ++op) {
        const std::string name = to_string(Op(op));
        EXPECT_NE(std::find(covered.begin(), covered.end(), name), covered.end())
            << "no bad call for op " << name;
    }
}

class OpChecksOn : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        try {
            backend_ = make_backend(GetParam(), 1);
        } catch (const Error& e) {
            if (GetParam() == "cpu") throw;
            SPARSENET_CUDA_UNAVAILABLE(e.what());
        }
    }
    std::unique_ptr<Backend> backend_;
};

TEST_P(OpChecksOn, EveryBadCallIsRefusedWithTheSameMessage) {
    for (const BadCall& c : bad_calls()) {
        try {
            c.call(*backend_);
            ADD_FAILURE() << backend_->name() << " accepted the call that should fail with \""
                          << c.expected << "\"";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kInternal) << e.what();
            EXPECT_EQ(std::string(e.what()), c.expected) << "on " << backend_->name();
        }
    }
}

// The same arguments with the mismatch removed are accepted: the checks refuse only what is
// wrong. (The checks are one code for every backend; empty shapes, so the CPU has nothing to
// read or write.)
TEST(OpChecks, AgreeingEmptyShapesAreAccepted) {
    std::unique_ptr<Backend> backend = make_backend("cpu", 1);
    Backend& b = *backend;
    EXPECT_NO_THROW(b.csr_matmul(csr(0, 3), {}, cmat(3, 4), mat(0, 4), 0.0f));
    EXPECT_NO_THROW(b.gemm(false, false, 1, cmat(0, 3), cmat(3, 4), 0, mat(0, 4)));
    EXPECT_NO_THROW(b.add_matrix(1, cmat(0, 4), 0, mat(0, 4)));
    EXPECT_NO_THROW(b.dropout(mask(7, 0.0f), mat(2, 4)));  // p = 0: a no-op, the mask unread
    EXPECT_NO_THROW(b.top_k(cmat(0, 4), nullptr, 5, nullptr, nullptr));
    EXPECT_NO_THROW(b.row_max(ConstMatrixView(mat(1, 4, 0)), g_unused));  // one row: ld unused
}

// A backend whose implementations only record that they were reached: the bad calls must be
// refused by the shared checks (Backend's non-virtual ops) before any _impl runs, with the same
// messages the CPU backend gives; calls that agree reach the _impl.
class RecordingBackend : public Backend {
  public:
    std::vector<std::string> reached;

    std::string name() const override { return "recording"; }
    void* allocate(size_t, const char*) override { return g_unused; }
    void deallocate(void*) override {}
    void upload(void*, const void*, size_t) override {}
    void download(void*, const void*, size_t) override {}
    void copy(void*, const void*, size_t) override {}
    void fill(float*, size_t, float) override {}
    void synchronize() override {}

  protected:
    void csr_matmul_impl(const CsrBatchView&, SparseNoise, ConstMatrixView, MatrixView,
                         float) override {
        reached.push_back("csr_matmul");
    }
    void csr_weight_grad_impl(const CsrBatchView&, SparseNoise, ConstMatrixView, float,
                              const SparseRowGrad&) override {
        reached.push_back("csr_weight_grad");
    }
    void gemm_impl(bool, bool, float, ConstMatrixView, ConstMatrixView, float,
                   MatrixView) override {
        reached.push_back("gemm");
    }
    void bias_activation_forward_impl(const formulas::ActivationParams&, const float*, MatrixView,
                                      uint16_t*) override {
        reached.push_back("bias_activation_forward");
    }
    void activation_backward_impl(const formulas::ActivationParams&, ConstMatrixView,
                                  const DropoutMask*, MatrixView, uint16_t*) override {
        reached.push_back("activation_backward");
    }
    void column_sum_impl(ConstMatrixView, float, float, float*) override {
        reached.push_back("column_sum");
    }
    void dropout_impl(const DropoutMask&, MatrixView) override { reached.push_back("dropout"); }
    void output_delta_impl(const formulas::LossParams&, const formulas::ActivationParams&,
                           ConstMatrixView, const CsrBatchView&, float, MatrixView, double*, float*,
                           uint16_t*) override {
        reached.push_back("output_delta");
    }
    void sparseness_penalty_impl(float, float, ConstMatrixView, float, MatrixView,
                                 double*) override {
        reached.push_back("sparseness_penalty");
    }
    void normalize_rows_impl(float, MatrixView) override { reached.push_back("normalize_rows"); }
    void normalize_columns_impl(float, MatrixView) override {
        reached.push_back("normalize_columns");
    }
    void row_max_impl(ConstMatrixView, float*) override { reached.push_back("row_max"); }
    void exp_rows_impl(const float*, MatrixView, float*) override { reached.push_back("exp_rows"); }
    void divide_rows_impl(const float*, MatrixView) override { reached.push_back("divide_rows"); }
    void row_sum_squares_impl(ConstMatrixView, float*) override {
        reached.push_back("row_sum_squares");
    }
    void clip_rows_impl(float, const float*, MatrixView) override {
        reached.push_back("clip_rows");
    }
    void sum_squares_impl(const std::vector<ConstMatrixView>&, float*) override {
        reached.push_back("sum_squares");
    }
    void add_matrix_impl(float, ConstMatrixView, float, MatrixView) override {
        reached.push_back("add_matrix");
    }
    void scatter_rows_impl(const SparseRowGrad&, float, MatrixView) override {
        reached.push_back("scatter_rows");
    }
    void optimizer_step_impl(const formulas::OptimizerStep&, MatrixView, ConstMatrixView, float*,
                             float*, uint16_t*) override {
        reached.push_back("optimizer_step");
    }
    void round_bf16_impl(ConstMatrixView, uint16_t*) override { reached.push_back("round_bf16"); }
    void optimizer_step_rows_impl(const formulas::OptimizerStep&, MatrixView, const SparseRowGrad&,
                                  float*, float*, SparseUpdate, RowClock) override {
        reached.push_back("optimizer_step_rows");
    }
    void catch_up_rows_impl(const formulas::OptimizerStep&, MatrixView, const CsrBatchView*, float*,
                            RowClock) override {
        reached.push_back("catch_up_rows");
    }
    void top_k_impl(ConstMatrixView, const CsrBatchView*, size_t, float*, uint32_t*,
                    const TopKActivation*) override {
        reached.push_back("top_k");
    }
};

TEST(OpChecks, BadCallsNeverReachAnImplementationAndMatchTheCpuMessages) {
    std::unique_ptr<Backend> cpu = make_backend("cpu", 1);
    for (const BadCall& c : bad_calls()) {
        RecordingBackend rec;
        std::string got;
        try {
            c.call(rec);
        } catch (const Error& e) {
            got = e.what();
        }
        EXPECT_EQ(got, c.expected);
        EXPECT_TRUE(rec.reached.empty())
            << "\"" << c.expected << "\" reached " << rec.reached.front() << "_impl";
        std::string on_cpu;
        try {
            c.call(*cpu);
        } catch (const Error& e) {
            on_cpu = e.what();
        }
        EXPECT_EQ(on_cpu, got) << "the CPU backend's message differs";
    }
}

// The recording is not vacuous: calls that agree reach the implementation, once each.
TEST(OpChecks, AgreeingCallsReachTheImplementation) {
    RecordingBackend rec;
    rec.gemm(false, false, 1, cmat(2, 3), cmat(3, 4), 0, mat(2, 4));
    rec.add_matrix(1, cmat(2, 4), 0, mat(2, 4));
    rec.row_sum_squares(cmat(2, 4), g_unused);
    EXPECT_EQ(rec.reached, (std::vector<std::string>{"gemm", "add_matrix", "row_sum_squares"}));
}

INSTANTIATE_TEST_SUITE_P(Backends, OpChecksOn, ::testing::Values("cpu", "cuda:0"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             return info.param == "cpu" ? std::string("Cpu") : std::string("Cuda");
                         });

}  // namespace
}  // namespace sparsenet
