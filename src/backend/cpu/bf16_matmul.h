// The CPU backend's BF16 GEMM kernels (Precision::kBf16; docs/kernels.md, "BF16 GEMMs on the
// CPU"): which one a process runs, and the oneDNN matmul that runs on CPUs with BF16 instructions.
//
// Two kernels compute c = alpha * op(a) . op(b) + beta * c on BF16 operands with FP32 products,
// sums and output:
//  * kEmulation: the operands rounded (or widened from their BF16 copies) into FP32 scratch, then
//    the FP32 sgemm (OpenBLAS). Exact: a product of two BF16 values is exact in FP32. Every CPU
//    runs it; it is the tests' oracle.
//  * kOnednn: oneDNN's matmul primitive on the BF16 values themselves (AMX tiles on Intel CPUs
//    that have them, AVX512-BF16 dot products otherwise). The same products; the sums in another
//    order, and AMX flushes denormal products to zero (a product of two 1e-20s: 0 instead of
//    1e-40). Measured on an Intel Xeon with AMX, 2 threads, at dsstne-bench's output layer
//    (docs/benchmarks.md): 3-4x the FP32 sgemm's rate.
//
// Why the operands are dense: oneDNN 2.6's AMX matmul (brg:avx512_core_amx_bf16) takes only
// dense row-major or transposed operands; a padded leading dimension on any of the three makes it
// pick its generic gemm:jit (84-170 GFLOP/s at the same shapes, below FP32's). So the caller runs
// the GEMM over the padding where the views allow it (zero_padded, as the GPU's extents do:
// backend/gemm_extents.h), and packs an operand whose layout still is not dense.
// Why alpha is a binary-multiply post-op with a run-time scalar: 2.6's AMX matmul refuses run-time
// output scales, and the fused SGD step passes alpha = -learning rate, which changes every step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sparsenet::cpu {

enum class Bf16Kernel { kEmulation, kOnednn };
const char* to_string(Bf16Kernel k);  // "emulation", "onednn"

// What this process's BF16 GEMMs run by default, decided once (the first call) from what the CPU
// has, as oneDNN reports it (dnnl::get_effective_cpu_isa, which honours ONEDNN_MAX_CPU_ISA):
//  * AMX (avx512_core_amx): kOnednn;
//  * AVX512-BF16 without AMX: whichever of kOnednn and kEmulation is faster at 512 x 1024 x 1024
//    (timed once here: oneDNN's avx512_core_bf16 matmul is not always ahead of the FP32 sgemm);
//  * anything less, or a build without oneDNN: kEmulation (oneDNN 2.6 cannot create a BF16 matmul
//    below AVX-512).
// SPARSENET_CPU_BF16_KERNEL=emulation|onednn sets it (onednn on a CPU that cannot run it is
// Error(kUsage)); tests set a backend's kernel directly (CpuBackend::set_bf16_kernel).
struct Bf16Choice {
    Bf16Kernel kernel = Bf16Kernel::kEmulation;
    // With AMX: the weight gradients of wide layers run on amx_gemm_tn (amx_gemm.h), their update
    // and BF16 copy fused (SPARSENET_CPU_AMX_GEMM=0 keeps them on oneDNN's matmul).
    bool amx_gemm = false;
    std::string line;  // "bf16 GEMMs -> onednn (CPU ISA avx512_core_amx ...)", for logs and results
};
const Bf16Choice& bf16_choice();

// What bf16_choice decides from, measured once per process (the start-up probe).
struct Bf16Probe {
    bool available = false;  // a BF16 matmul primitive could be created
    bool amx = false;        // oneDNN's effective ISA includes AMX
    std::string isa;         // oneDNN's effective ISA ("avx512_core_bf16")
    std::string impl;        // the implementation of a 512 x 1024 x 1024 matmul
    double onednn_s = 0;     // its time, and the emulation's (0: not timed)
    double emulation_s = 0;
    std::string error;  // why no primitive could be created
};

// The decision itself, without the CPU: forced is SPARSENET_CPU_BF16_KERNEL ("", "auto",
// "onednn" or "emulation"; anything else, or "onednn" where !probe.available, is Error(kUsage)).
// Without AMX and unforced, the faster of the probe's two timings wins (ties: the emulation).
// amx_gemm_env is SPARSENET_CPU_AMX_GEMM ("", "1" or "0"; anything else is Error(kUsage)).
Bf16Choice choose_bf16_kernel(const std::string& forced, const Bf16Probe& probe,
                              const std::string& amx_gemm_env = "");

// Whether this build and CPU can run kOnednn at all (a BF16 matmul primitive can be created).
bool onednn_bf16_available();
bool built_with_onednn();  // SPARSENET_ONEDNN found oneDNN

// oneDNN's BF16 matmul with FP32 output: c[m, n] = alpha * op(a) . op(b) + beta * c, every operand
// dense (a: [m, k] or, transposed, [k, m]; b: [k, n] or [n, k]; c: [m, n]). One primitive per
// (transposes, m, n, k, whether beta is 0, 1 or another value, threads), created at first use
// (oneDNN JIT-compiles it) and reused; alpha and beta are read at run time (another beta than 0
// and 1 as c := beta (alpha / beta . ab + c); |beta| < 1e-30 is refused). threads bounds oneDNN's
// OpenMP threads for the call, as it bounds OpenBLAS's. Not thread-safe: one object per backend,
// which runs one op at a time. In a build without oneDNN every call is Error(kNotImplemented).
class OnednnMatmul {
  public:
    OnednnMatmul();
    ~OnednnMatmul();
    OnednnMatmul(const OnednnMatmul&) = delete;
    OnednnMatmul& operator=(const OnednnMatmul&) = delete;

    void run(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha,
             const uint16_t* a, const uint16_t* b, float beta, float* c, int threads);
    // The implementation oneDNN chose for the last primitive created ("brg:avx512_core_amx_bf16"),
    // "" before the first.
    const std::string& last_implementation() const;
    size_t primitives() const;  // how many are cached

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sparsenet::cpu
