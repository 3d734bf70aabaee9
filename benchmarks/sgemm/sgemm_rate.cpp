// The machine's sgemm rate at one dense layer's three training shapes, with the OpenBLAS and the
// thread count that `sparsenet train --threads T` uses (omp_set_num_threads, the OpenMP build of
// OpenBLAS follows it). benchmarks/bench.py runs it beside each epoch and reports the epoch's
// model-FLOP rate as a fraction of this one (docs/benchmarks.md).
//
// For a layer z = h . W with h: [batch, in] and W: [in, out] (row-major, ld == width, as the
// engine stores them) one training step runs
//   forward       z  = h . W        m = batch, n = out, k = in
//   input delta   dh = dz . W^T     m = batch, n = in,  k = out
//   weight grad   W += h^T . dz     m = in,    n = out, k = batch (beta 1, as the fused SGD step)
// Each shape is timed --repeats times after one warm-up call; the median of each is printed, and
// the rate of the three together (their FLOPs over the sum of their median times): one JSON
// object on stdout.
//
// usage: sparsenet_bench_sgemm BATCH IN OUT [threads=2] [repeats=5] [pad=0]
// pad: extra floats per row of every matrix whose rows are OUT wide (W, z, dz, dW): the leading
// dimension OUT + pad, e.g. to measure a leading dimension padded to a multiple of 16 floats.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "layer_args.h"

namespace {

using sparsenet::bench::median;

struct Shape {
    const char* name;
    bool trans_a, trans_b;
    int m, n, k;
    const float *a, *b;
    int lda, ldb;
    float* c;
    int ldc;
    float beta;  // the weight gradient's 1: the SGD and Momentum steps add it into the weights
};

}  // namespace

int main(int argc, char** argv) {
    sparsenet::bench::LayerArgs args;
    if (!sparsenet::bench::parse_layer_args(argc, argv, /*takes_pad=*/true, &args)) return 2;
    const int batch = args.batch, in = args.in, out = args.out, threads = args.threads;
    const int repeats = args.repeats, pad = args.pad;
    const int ldo = out + pad;
    omp_set_num_threads(threads);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    auto filled = [&](size_t n) {
        sparsenet::bench::AlignedVector<float> v(n);
        for (float& x : v) x = u(rng);
        return v;
    };
    using sparsenet::bench::AlignedVector;
    const AlignedVector<float> h = filled(size_t(batch) * in), w = filled(size_t(in) * ldo),
                               dz = filled(size_t(batch) * ldo);
    AlignedVector<float> z(size_t(batch) * ldo), dh(size_t(batch) * in), dw(size_t(in) * ldo);
    // ldc: the result's leading dimension.
    const Shape shapes[] = {
        {"forward", false, false, batch, out, in, h.data(), w.data(), in, ldo, z.data(), ldo, 0.0f},
        {"input_delta", false, true, batch, in, out, dz.data(), w.data(), ldo, ldo, dh.data(), in,
         0.0f},
        {"weight_gradient", true, false, in, out, batch, h.data(), dz.data(), in, ldo, dw.data(),
         ldo, 1.0f},
    };
    std::printf(
        "{\"batch\": %d, \"in\": %d, \"out\": %d, \"threads\": %d, \"repeats\": %d, "
        "\"ld_pad\": %d",
        batch, in, out, threads, repeats, pad);
    double flop_all = 0.0, seconds_all = 0.0;
    for (const Shape& s : shapes) {
        std::vector<double> seconds;
        for (int r = 0; r <= repeats; ++r) {  // r == 0: warm-up (OpenBLAS buffers, page faults)
            const auto start = std::chrono::steady_clock::now();
            cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                        s.trans_b ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f, s.a, s.lda, s.b,
                        s.ldb, s.beta, s.c, s.ldc);
            const double t =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (r > 0) seconds.push_back(t);
        }
        const double flop = 2.0 * s.m * s.n * s.k, t = median(seconds);
        flop_all += flop;
        seconds_all += t;
        std::printf(", \"%s_s\": %.6f, \"%s_gflops\": %.2f", s.name, t, s.name, flop / t / 1e9);
    }
    std::printf(", \"gflops\": %.2f}\n", flop_all / seconds_all / 1e9);
    return 0;
}
