// Micro-benchmarks of the CPU backend's ops at the shapes of dsstne-bench (batch 256, 27,278
// items, 1024 hidden units, 144 nonzeros per row), beside OpenBLAS sgemm itself. Each reports
// FLOP/s (counters "FLOP/s") and bytes/s of the operands it must touch ("bytes/s").
// Run: build/benchmarks/sparsenet_bench_ops [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>
#include <vector>

#include "backend/backend.h"
#include "sparsenet/dataset.h"

namespace sparsenet {
namespace {

constexpr size_t kBatch = 256, kItems = 27278, kHidden = 1024, kRowNnz = 144;

std::unique_ptr<Backend>& cpu() {
    static std::unique_ptr<Backend> b = make_backend("cpu", 0);
    return b;
}

std::vector<float> random_floats(size_t n, float scale = 1.0f) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

// A CSR batch of kBatch rows with kRowNnz random columns each (sorted, unique).
struct Csr {
    std::vector<uint64_t> offsets{0};
    std::vector<uint32_t> indices;
    Csr() {
        std::mt19937 rng(2);
        for (size_t r = 0; r < kBatch; ++r) {
            std::vector<uint32_t> row;
            while (row.size() < kRowNnz) {
                row.push_back(rng() % kItems);
                std::sort(row.begin(), row.end());
                row.erase(std::unique(row.begin(), row.end()), row.end());
            }
            indices.insert(indices.end(), row.begin(), row.end());
            offsets.push_back(indices.size());
        }
    }
    CsrBatchView view() const {
        CsrBatchView v;
        v.offsets = offsets.data();
        v.indices = indices.data();
        v.batch = BatchRows{nullptr, 0, kBatch};
        v.cols = kItems;
        return v;
    }
};

void set_counters(benchmark::State& s, double flop, double bytes) {
    s.counters["FLOP/s"] = benchmark::Counter(flop, benchmark::Counter::kIsIterationInvariantRate);
    s.counters["bytes/s"] =
        benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

// The peak to compare with: OpenBLAS sgemm on the output layer's forward shape.
void BM_CblasSgemmOutputForward(benchmark::State& s) {
    auto a = random_floats(kBatch * kHidden), b = random_floats(kHidden * kItems);
    std::vector<float> c(kBatch * kItems);
    for (auto _ : s) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kBatch, kItems, kHidden, 1.0f,
                    a.data(), kHidden, b.data(), kItems, 0.0f, c.data(), kItems);
        benchmark::ClobberMemory();
    }
    set_counters(s, 2.0 * kBatch * kItems * kHidden, 4.0 * (a.size() + b.size() + c.size()));
}
BENCHMARK(BM_CblasSgemmOutputForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CblasSgemmSquare(benchmark::State& s) {
    const size_t n = s.range(0);
    auto a = random_floats(n * n), b = random_floats(n * n);
    std::vector<float> c(n * n);
    for (auto _ : s) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                    n, 0.0f, c.data(), n);
        benchmark::ClobberMemory();
    }
    set_counters(s, 2.0 * n * n * n, 12.0 * n * n);
}
BENCHMARK(BM_CblasSgemmSquare)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

// gemm op: the three GEMMs of the output layer (forward, input delta, weight gradient), in fp32
// and in bf16 (the CPU's emulation: both operands rounded into scratch, then the same sgemm).
void BM_GemmOutputLayer(benchmark::State& s) {
    const bool ta = s.range(0) == 2, tb = s.range(0) == 1;
    cpu()->set_precision(s.range(1) == 1 ? Precision::kBf16 : Precision::kFp32);
    auto x = random_floats(kBatch * kHidden), w = random_floats(kHidden * kItems),
         d = random_floats(kBatch * kItems);
    std::vector<float> out(std::max(kBatch * kItems, kHidden * kItems));
    for (auto _ : s) {
        if (s.range(0) == 0) {  // z = x . W
            cpu()->gemm(false, false, 1, {x.data(), kBatch, kHidden, kHidden},
                        {w.data(), kHidden, kItems, kItems}, 0,
                        {out.data(), kBatch, kItems, kItems});
        } else if (tb) {  // dx = d . W^T
            cpu()->gemm(false, true, 1, {d.data(), kBatch, kItems, kItems},
                        {w.data(), kHidden, kItems, kItems}, 0,
                        {out.data(), kBatch, kHidden, kHidden});
        } else if (ta) {  // dW = x^T . d
            cpu()->gemm(true, false, 1, {x.data(), kBatch, kHidden, kHidden},
                        {d.data(), kBatch, kItems, kItems}, 0,
                        {out.data(), kHidden, kItems, kItems});
        }
        benchmark::ClobberMemory();
    }
    cpu()->set_precision(Precision::kFp32);
    set_counters(s, 2.0 * kBatch * kItems * kHidden,
                 4.0 * (kBatch * kHidden + 2 * kHidden * kItems));
}
BENCHMARK(BM_GemmOutputLayer)
    ->ArgNames({"0=forward,1=dx,2=dW", "0=fp32,1=bf16"})
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_CsrMatmul(benchmark::State& s) {
    const Csr x;
    auto w = random_floats(kItems * kHidden);
    std::vector<float> z(kBatch * kHidden);
    for (auto _ : s) {
        cpu()->csr_matmul(x.view(), {}, {w.data(), kItems, kHidden, kHidden},
                          {z.data(), kBatch, kHidden, kHidden}, 0.0f);
        benchmark::ClobberMemory();
    }
    const double nnz = x.indices.size();
    set_counters(s, 2.0 * nnz * kHidden, 4.0 * (nnz * kHidden + z.size()));
}
BENCHMARK(BM_CsrMatmul)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CsrWeightGrad(benchmark::State& s) {
    const Csr x;
    auto dz = random_floats(kBatch * kHidden);
    const size_t capacity = x.indices.size();
    std::vector<uint32_t> rows(capacity), count(1);
    std::vector<float> values(capacity * kHidden);
    SparseRowGrad g{rows.data(), count.data(), values.data(), capacity, kHidden};
    for (auto _ : s) {
        cpu()->csr_weight_grad(x.view(), {}, {dz.data(), kBatch, kHidden, kHidden}, 1.0f, g);
        benchmark::ClobberMemory();
    }
    const double nnz = x.indices.size();
    set_counters(s, 2.0 * nnz * kHidden, 4.0 * (2 * nnz * kHidden));
}
BENCHMARK(BM_CsrWeightGrad)->Unit(benchmark::kMillisecond)->UseRealTime();

// The sparse input layer's fused step (csr_weight_grad then SGD on the touched rows): each
// touched weight row (4 KB) read and written once, the batch's dz rows (1 MB, in cache) gathered
// per entry. Its floor is the touched rows' traffic at the machine's read-modify-write rate
// (BM_ReadModifyWrite on the whole matrix).
void BM_SparseStepSgd(benchmark::State& s) {
    const Csr x;
    auto dz = random_floats(kBatch * kHidden);
    DeviceArray<float> w(*cpu(), kItems * kHidden, "weights");
    const auto init = random_floats(kItems * kHidden, 0.01f);
    std::copy(init.begin(), init.end(), w.data());
    const size_t capacity = x.indices.size();
    std::vector<uint32_t> rows(capacity), count(1);
    std::vector<float> values(capacity * kHidden);
    SparseRowGrad g{rows.data(), count.data(), values.data(), capacity, kHidden};
    formulas::OptimizerStep step;
    step.learning_rate = 1e-6f;
    for (auto _ : s) {
        cpu()->sparse_step(x.view(), {}, {dz.data(), kBatch, kHidden, kHidden}, -1e-6f, step,
                           {w.data(), kItems, kHidden, kHidden}, g, nullptr, nullptr,
                           SparseUpdate::kLazy);
        benchmark::ClobberMemory();
    }
    const double nnz = x.indices.size(), touched = count[0];
    s.counters["touched_rows"] = touched;
    set_counters(s, 2.0 * nnz * kHidden, 4.0 * (2 * touched * kHidden));
}
BENCHMARK(BM_SparseStepSgd)->Unit(benchmark::kMillisecond)->UseRealTime();

// The machine's read-modify-write rate over a matrix the size of the input layer's weights
// (112 MB, beyond any L3 here): w := w + bias (a Linear activation) by the backend's threads.
// bytes/s counts each element's read and write.
void BM_ReadModifyWrite(benchmark::State& s) {
    DeviceArray<float> w(*cpu(), kItems * kHidden, "weights");
    std::fill(w.data(), w.data() + kItems * kHidden, 0.0f);
    const std::vector<float> ones(kItems, 1.0f);
    formulas::ActivationParams linear;
    linear.kind = Activation::kLinear;
    for (auto _ : s) {
        cpu()->bias_activation_forward(linear, ones.data(), {w.data(), kHidden, kItems, kItems});
        benchmark::ClobberMemory();
    }
    set_counters(s, double(kItems) * kHidden, 8.0 * kItems * kHidden);
}
BENCHMARK(BM_ReadModifyWrite)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_BiasSigmoidForward(benchmark::State& s) {
    auto z = random_floats(kBatch * kItems), bias = random_floats(kItems);
    formulas::ActivationParams act;
    act.kind = Activation::kSigmoid;
    for (auto _ : s) {
        cpu()->bias_activation_forward(act, bias.data(), {z.data(), kBatch, kItems, kItems});
        benchmark::ClobberMemory();
    }
    set_counters(s, 5.0 * z.size(), 8.0 * z.size());
}
BENCHMARK(BM_BiasSigmoidForward)->Unit(benchmark::kMillisecond)->UseRealTime();

// dsstne-bench's output delta (sigmoid, ScaledMarginalCrossEntropy) with its loss, or without:
// the difference is what the loss's logarithms cost.
void output_delta_smce(benchmark::State& s, bool with_loss) {
    const Csr t;
    std::vector<float> a(kBatch * kItems, 0.01f), delta(kBatch * kItems);
    formulas::LossParams loss;
    loss.kind = ErrorFunction::kScaledMarginalCrossEntropy;
    loss.one_target = 1.0f;  // dsstne-bench's margins: every zero target's loss a logarithm
    loss.zero_target = 0.0f;
    formulas::ActivationParams act;
    act.kind = Activation::kSigmoid;
    for (auto _ : s) {
        double sum = 0;
        cpu()->output_delta(loss, act, {a.data(), kBatch, kItems, kItems}, t.view(), 1.0f,
                            {delta.data(), kBatch, kItems, kItems}, with_loss ? &sum : nullptr);
        benchmark::DoNotOptimize(sum);
        benchmark::ClobberMemory();
    }
    set_counters(s, 4.0 * a.size(), 8.0 * a.size());
}
void BM_OutputDeltaSmce(benchmark::State& s) {
    output_delta_smce(s, true);
}
BENCHMARK(BM_OutputDeltaSmce)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_OutputDeltaSmceNoLoss(benchmark::State& s) {
    output_delta_smce(s, false);
}
BENCHMARK(BM_OutputDeltaSmceNoLoss)->Unit(benchmark::kMillisecond)->UseRealTime();

// The output layer of a bf16 training step as Network::Impl::backward runs it: z := sigmoid(z +
// bias), each row's norm (the finite-value guard), the loss, the delta written over the
// activations and its BF16 copy, in one op (ScaledMarginalCrossEntropy, dsstne-bench's).
void BM_OutputEpilogueSmce(benchmark::State& s) {
    const Csr t;
    DeviceArray<float> z(*cpu(), kBatch * kItems, "z");
    const auto init = random_floats(kBatch * kItems);
    std::vector<float> bias(kItems, -10.2f), norms(kBatch);
    std::vector<uint16_t> delta_bf16(kBatch * kItems);
    formulas::LossParams loss;
    loss.kind = ErrorFunction::kScaledMarginalCrossEntropy;
    loss.one_target = 1.0f;  // dsstne-bench's margins: every zero target's loss a logarithm
    loss.zero_target = 0.0f;
    formulas::ActivationParams act;
    act.kind = Activation::kSigmoid;
    for (auto _ : s) {
        s.PauseTiming();
        std::copy(init.begin(), init.end(), z.data());
        s.ResumeTiming();
        double sum = 0;
        const MatrixView zv{z.data(), kBatch, kItems, kItems};
        cpu()->output_epilogue(loss, act, bias.data(), zv, t.view(), 1.0f / kBatch, zv, &sum,
                               norms.data(), delta_bf16.data());
        benchmark::DoNotOptimize(sum);
    }
    set_counters(s, 0, 10.0 * z.size());
}
BENCHMARK(BM_OutputEpilogueSmce)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TopK100WithExclusion(benchmark::State& s) {
    const Csr seen;
    auto scores = random_floats(kBatch * kItems);
    std::vector<float> out_scores(kBatch * 100);
    std::vector<uint32_t> out_indices(kBatch * 100);
    const CsrBatchView exclude = seen.view();
    for (auto _ : s) {
        cpu()->top_k({scores.data(), kBatch, kItems, kItems}, &exclude, 100, out_scores.data(),
                     out_indices.data());
        benchmark::ClobberMemory();
    }
    set_counters(s, 0, 4.0 * scores.size());
}
BENCHMARK(BM_TopK100WithExclusion)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sparsenet

BENCHMARK_MAIN();
