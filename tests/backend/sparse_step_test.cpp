// sparse_step: a sparse input's gradient and touched-rows update in one op, against the two ops
// it fuses (csr_weight_grad, then optimizer_step_rows): the same weights, optimizer state and row
// clocks bit for bit over three steps (rows touched in one step and not the next, so clocked rows
// catch up), for SGD, Momentum and Nesterov (lazy and exact with a row clock), AdaGrad and Adam
// (lazy), with and without L2 and input noise, valued and boolean inputs, permuted batches,
// padded weights, 1 and 2 threads. On a device: fused against the device's two ops bit for bit,
// and against the CPU within a tolerance, on csr_weight_grad's tile path, its sorted path (a
// 20,000-wide input) and over two tiles of rows (where the device runs the two ops).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "backend/parity_harness.h"

namespace sparsenet::parity {
namespace {

struct StepCase {
    OptimizerKind kind = OptimizerKind::kSgd;
    SparseUpdate mode = SparseUpdate::kLazy;
    bool clocked = false;  // exact with a row clock (Momentum, Nesterov)
    float l2 = 0.0f;
    float p = 0.0f;  // input noise
    bool valued = false, permuted = false;
    size_t batch = 9, out = 37, pad = 3;
    uint32_t in = 61;
    // The gradient's capacity: the input width (CUDA: csr_weight_grad's tile path), or the
    // batches' largest entry count, below a wide input's width (its sorted path).
    bool capacity_by_entries = false;
    uint64_t seed = 1;
    std::string name() const {
        return std::string(to_string(kind)) + (clocked ? " clocked" : "") +
               (mode == SparseUpdate::kLazy ? " lazy" : " exact") + " l2=" + std::to_string(l2) +
               " p=" + std::to_string(p) + (valued ? " valued" : "") +
               (permuted ? " permuted" : "") + " out=" + std::to_string(out);
    }
};

struct StepResult {
    Dense<float> w, s1, s2;
    std::vector<uint32_t> clock;
};

formulas::OptimizerStep step_of(const StepCase& c, uint32_t t) {
    formulas::OptimizerStep s;
    s.kind = c.kind;
    s.learning_rate = 0.05f;
    s.mu = 0.9f;
    s.mu1 = 0.999f;
    s.epsilon = 1e-6f;
    s.l2 = c.l2;
    s.bias_correction1 = float(1.0 / (1.0 - std::pow(0.9, double(t))));
    s.bias_correction2 = float(1.0 / (1.0 - std::pow(0.999, double(t))));
    return s;
}

// Three steps on `be` (any backend: a CPU backend's memory is host memory), each on its own
// batch, fused (sparse_step) or as the two ops.
StepResult run_steps(Backend& be, const StepCase& c, bool fused) {
    StepResult r;
    r.w = testing::random_dense<float>(c.in, c.out, c.pad, c.seed, -0.5, 0.5);
    const int slots = formulas::optimizer_state_slots(c.kind);
    r.s1 = testing::random_dense<float>(c.in, c.out, c.pad, c.seed + 1, 0.0, slots ? 0.1 : 0.0);
    r.s2 = testing::random_dense<float>(c.in, c.out, c.pad, c.seed + 2, 0.0, slots > 1 ? 0.1 : 0.0);
    DevMat w(be, r.w), s1(be, r.s1), s2(be, r.s2);
    DeviceArray<uint32_t> clock(be, c.in, "row clock");
    const std::vector<uint32_t> zeros(c.in, 0u);
    clock.upload(zeros.data(), zeros.size());
    // Each step its own rows (power-law row lengths: touched sets vary from step to step).
    std::vector<Dataset> data;
    std::vector<TestBatch> batches;
    size_t most = 0;
    for (uint32_t t = 1; t <= 3; ++t) {
        data.push_back(testing::random_dataset(c.batch + 6, c.in, testing::RowShape::kPowerLaw,
                                               c.valued, c.seed * 10 + t));
        batches.push_back(
            testing::make_batch(data.back().rows, c.batch, c.permuted, c.seed + 5 * t));
        size_t nnz = 0;
        for (size_t b = 0; b < c.batch; ++b) {
            const uint64_t ex = batches.back().example(b);
            nnz += data.back().offsets[ex + 1] - data.back().offsets[ex];
        }
        most = std::max(most, nnz);
    }
    RowGrad grad(be, c.capacity_by_entries ? std::min<size_t>(c.in, most) : c.in, c.out);
    for (uint32_t t = 1; t <= 3; ++t) {
        const Dataset& d = data[t - 1];
        const TestBatch& batch = batches[t - 1];
        const Dense<float> dz = testing::random_dense<float>(c.batch, c.out, 2, c.seed + 7 * t);
        DevCsr x(be, d, batch);
        DevMat dzd(be, dz);
        const SparseNoise noise{c.p, c.seed * 13 + t};
        const formulas::OptimizerStep step = step_of(c, t);
        const RowClock rc = c.clocked ? RowClock{clock.data(), t} : RowClock{};
        float* st1 = slots >= 1 ? s1.buf.data() : nullptr;
        float* st2 = slots >= 2 ? s2.buf.data() : nullptr;
        if (fused) {
            be.sparse_step(x.view, noise, dzd.cview(), 1.0f, step, w.view(), grad.view(), st1, st2,
                           c.mode, rc);
        } else {
            be.csr_weight_grad(x.view, noise, dzd.cview(), 1.0f, grad.view());
            be.optimizer_step_rows(step, w.view(), grad.view(), st1, st2, c.mode, rc);
        }
    }
    r.w = w.get(r.w);
    r.s1 = s1.get(r.s1);
    r.s2 = s2.get(r.s2);
    r.clock = fetch(clock, c.in);
    return r;
}

std::vector<StepCase> grid() {
    std::vector<StepCase> cases;
    uint64_t seed = 0;
    const OptimizerKind kinds[] = {OptimizerKind::kSgd, OptimizerKind::kMomentum,
                                   OptimizerKind::kNesterov, OptimizerKind::kAdaGrad,
                                   OptimizerKind::kAdam};
    for (OptimizerKind kind : kinds)
        for (int variant = 0; variant < 4; ++variant) {
            StepCase c;
            c.kind = kind;
            c.seed = ++seed;
            c.valued = variant % 2 == 1;
            c.permuted = variant >= 2;
            c.p = variant == 1 ? 0.3f : 0.0f;
            c.out = variant == 3 ? 130 : 37;
            const bool momentum =
                kind == OptimizerKind::kMomentum || kind == OptimizerKind::kNesterov;
            if (momentum && variant % 2 == 0) {  // exact, caught up by the row clock
                c.mode = SparseUpdate::kExact;
                c.clocked = true;
                c.l2 = variant == 2 ? 0.01f : 0.0f;
            } else if (kind == OptimizerKind::kSgd && variant >= 2) {  // exact: zero g is a no-op
                c.mode = SparseUpdate::kExact;
            } else {
                c.l2 = variant == 3 ? 0.01f : 0.0f;
            }
            cases.push_back(c);
        }
    return cases;
}

// The grid, plus a wide input per optimizer (a capacity below the input's width: CUDA's sorted
// path) and a batch of 1,100 rows (two tiles of rows on CUDA, where it runs the two ops).
std::vector<StepCase> all_cases() {
    std::vector<StepCase> cases = grid();
    for (size_t k = 0; k < 5; ++k) {
        StepCase c = cases[k * 4 + 2];
        c.in = 20000;
        c.capacity_by_entries = true;
        cases.push_back(c);
    }
    StepCase tiles = cases[5];
    tiles.batch = 1100;
    cases.push_back(tiles);
    return cases;
}

::testing::AssertionResult same_bits(const StepResult& a, const StepResult& b) {
    auto same = [](const Dense<float>& x, const Dense<float>& y) {
        return std::memcmp(x.data.data(), y.data.data(), x.data.size() * sizeof(float)) == 0;
    };
    if (!same(a.w, b.w)) return ::testing::AssertionFailure() << "weights differ";
    if (!same(a.s1, b.s1)) return ::testing::AssertionFailure() << "state slot 1 differs";
    if (!same(a.s2, b.s2)) return ::testing::AssertionFailure() << "state slot 2 differs";
    if (a.clock != b.clock) return ::testing::AssertionFailure() << "row clocks differ";
    return ::testing::AssertionSuccess();
}

TEST(SparseStep, EqualsCsrWeightGradThenOptimizerStepRowsBitForBit) {
    for (int threads : {1, 2}) {
        CpuBackend cpu(threads);
        for (const StepCase& c : all_cases()) {
            const StepResult fused = run_steps(cpu, c, true), two = run_steps(cpu, c, false);
            EXPECT_TRUE(same_bits(fused, two)) << c.name() << ", " << threads << " threads";
            // Something moved: the test compares updated weights, not two untouched copies.
            EXPECT_NE(
                std::memcmp(
                    fused.w.data.data(),
                    testing::random_dense<float>(c.in, c.out, c.pad, c.seed, -0.5, 0.5).data.data(),
                    fused.w.data.size() * sizeof(float)),
                0)
                << c.name();
            if (c.clocked) {  // touched rows' clocks moved
                EXPECT_NE(fused.clock, std::vector<uint32_t>(fused.clock.size(), 0u)) << c.name();
            }
        }
    }
}

TEST(SparseStep, ResultsDoNotDependOnTheThreadCount) {
    CpuBackend one(1), two(2);
    for (const StepCase& c : grid())
        EXPECT_TRUE(same_bits(run_steps(one, c, true), run_steps(two, c, true))) << c.name();
}

// ---- on the device (skipped without a GPU) ----

TEST_F(CudaParity, SparseStepEqualsItsTwoOpsAndTheCpu) {
    for (const StepCase& c : all_cases()) {
        const StepResult fused = run_steps(dev(), c, true), two = run_steps(dev(), c, false);
        EXPECT_TRUE(same_bits(fused, two)) << c.name() << ": device fused vs device two ops";
        const StepResult cpu = run_steps(cpu_, c, true);
        EXPECT_EQ(fused.clock, cpu.clock) << c.name();
        double scale = 0, diff = 0;
        for (size_t i = 0; i < cpu.w.data.size(); ++i) {
            scale = std::max(scale, double(std::fabs(cpu.w.data[i])));
            diff = std::max(diff, double(std::fabs(cpu.w.data[i] - fused.w.data[i])));
        }
        EXPECT_LE(diff, 1e-4 * scale + 1e-6) << c.name() << ": device vs CPU weights";
    }
}

}  // namespace
}  // namespace sparsenet::parity
