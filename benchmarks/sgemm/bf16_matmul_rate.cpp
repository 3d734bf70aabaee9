// The machine's BF16 matmul rate at one dense layer's three training shapes, through the CPU
// backend's own gemm under --precision bf16 (src/backend/cpu/bf16_matmul.h) with the operands
// laid out as a training step has them: every matrix OUT wide padded to the engine's leading
// dimension (zero_padded), each operand's BF16 copy given (the weights' and the producers'
// copies), FP32 output. benchmarks/bench.py runs it beside each epoch, as sparsenet_bench_sgemm,
// and reports the epoch's model-FLOP rate as a fraction of it (docs/benchmarks.md).
//
// The shapes are sparsenet_bench_sgemm's:
//   forward       z  = h . W        m = batch, n = out, k = in
//   input delta   dh = dz . W^T     m = batch, n = in,  k = out
//   weight grad   W += h^T . dz     m = in,    n = out, k = batch (beta 1, as the fused SGD step)
// The kernel is the process's choice (SPARSENET_CPU_BF16_KERNEL sets it), printed in the JSON
// with oneDNN's implementation; with AMX the weight gradient of a wide layer runs on amx_gemm_tn
// (SPARSENET_CPU_AMX_GEMM=0: on oneDNN), named as weight_gradient_kernel. The rate is the
// backend's, so it counts whichever is faster: the epoch's fraction divides by what the engine
// itself can do at these shapes, not by oneDNN's rate alone.
//
// usage: sparsenet_bench_bf16_matmul BATCH IN OUT [threads=2] [repeats=5]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "formulas/precision.h"

#include "layer_args.h"

namespace {

using sparsenet::bench::median;

// A [rows, cols] matrix with row stride ld, zeros in the padding, and its BF16 copy.
struct Matrix {
    sparsenet::bench::AlignedVector<float> f;
    sparsenet::bench::AlignedVector<uint16_t> b;
    size_t rows, cols, ld;
    Matrix(size_t r, size_t c, size_t l, std::mt19937& rng)
        : f(r * l), b(r * l), rows(r), cols(c), ld(l) {
        std::uniform_real_distribution<float> u(-0.05f, 0.05f);
        for (size_t i = 0; i < r; ++i)
            for (size_t j = 0; j < c; ++j) {
                f[i * l + j] = u(rng);
                b[i * l + j] = sparsenet::formulas::bf16_bits(f[i * l + j]);
            }
    }
    sparsenet::ConstMatrixView in() const {
        return sparsenet::ConstMatrixView(f.data(), rows, cols, ld, true, b.data());
    }
    sparsenet::MatrixView out() {
        sparsenet::MatrixView v{f.data(), rows, cols, ld};
        v.zero_padded = true;
        return v;
    }
};

}  // namespace

int main(int argc, char** argv) {
    sparsenet::bench::LayerArgs args;
    if (!sparsenet::bench::parse_layer_args(argc, argv, /*takes_pad=*/false, &args)) return 2;
    const int batch = args.batch, in = args.in, out = args.out, threads = args.threads;
    const int repeats = args.repeats;
    // The engine's row padding (engine::padded_ld: a multiple of kPadFloats = 16 floats).
    const auto pad = [](size_t n) { return (n + 15) / 16 * 16; };
    omp_set_num_threads(threads);
    std::mt19937 rng(1);
    Matrix h(batch, in, pad(in), rng), w(in, out, pad(out), rng), dz(batch, out, pad(out), rng);
    Matrix z(batch, out, pad(out), rng), dh(batch, in, pad(in), rng), dw(in, out, pad(out), rng);
    sparsenet::CpuBackend backend(threads);
    backend.set_precision(sparsenet::Precision::kBf16);
    struct Shape {
        const char* name;
        bool ta, tb;
        const Matrix *a, *b;
        Matrix* c;
        double flop;
        float beta;  // the weight gradient's 1: the SGD and Momentum steps add it into the weights
    };
    const Shape shapes[] = {
        {"forward", false, false, &h, &w, &z, 2.0 * batch * out * in, 0.0f},
        {"input_delta", false, true, &dz, &w, &dh, 2.0 * batch * in * out, 0.0f},
        {"weight_gradient", true, false, &h, &dz, &dw, 2.0 * in * out * batch, 1.0f},
    };
    std::printf(
        "{\"batch\": %d, \"in\": %d, \"out\": %d, \"threads\": %d, \"repeats\": %d, "
        "\"kernel\": \"%s\"",
        batch, in, out, threads, repeats, sparsenet::cpu::to_string(backend.bf16_kernel()));
    double flop_all = 0.0, seconds_all = 0.0;
    for (const Shape& s : shapes) {
        std::vector<double> seconds;
        for (int r = 0; r <= repeats; ++r) {  // r == 0: warm-up (the primitive's creation)
            const auto start = std::chrono::steady_clock::now();
            backend.gemm(s.ta, s.tb, 1.0f, s.a->in(), s.b->in(), s.beta, s.c->out());
            const double t =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (r > 0) seconds.push_back(t);
        }
        const double t = median(seconds);
        flop_all += s.flop;
        seconds_all += t;
        std::printf(", \"%s_s\": %.6f, \"%s_gflops\": %.2f", s.name, t, s.name, s.flop / t / 1e9);
    }
    const bool tiles =
        backend.bf16_kernel() == sparsenet::cpu::Bf16Kernel::kOnednn && backend.amx_gemm() &&
        sparsenet::cpu::amx_gemm_tn_worth(size_t(in), size_t(out), size_t(batch), threads);
    std::printf(
        ", \"implementation\": \"%s\", \"weight_gradient_kernel\": \"%s\", \"gflops\": %.2f}\n",
        backend.onednn_implementation().c_str(),
        tiles ? "amx_gemm_tn" : backend.onednn_implementation().c_str(),
        flop_all / seconds_all / 1e9);
    return 0;
}
