// Mixed precision (--precision bf16): the rounding of a GEMM operand to BF16, written once for
// the CPU backend (which emulates bf16 GEMMs with it: round both operands, then the FP32 sgemm)
// and for the CUDA kernels that write the BF16 copies cuBLAS reads.
//
// BF16 is FP32's upper 16 bits: sign, the same 8-bit exponent (so the same range, denormals
// included) and 7 stored significand bits. Rounding is to nearest, ties to even, as
// __float2bfloat16_rn and every BF16 tensor-core path; a value beyond the largest BF16 number
// by half an ulp or more becomes infinity, infinities stay, and a NaN stays a NaN (made quiet,
// sign kept: incrementing its bits could otherwise carry it into infinity).
//
// Why the emulation is exact: a product of two BF16 numbers has at most 8 + 8 = 16 significand
// bits, so FP32 (24 bits) holds it exactly; with the sums in FP32, an sgemm of BF16-rounded
// operands computes what a BF16 GEMM with FP32 accumulation (CUBLAS_COMPUTE_32F) computes, up to
// the order of the additions, which differs between any two GEMM libraries (FP32 alike).
#pragma once

#include <cstdint>
#include <cstring>

#include "formulas/common.h"

namespace sparsenet::formulas {

SPARSENET_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
#endif
}

SPARSENET_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
#endif
}

// The BF16 bit pattern nearest to x (ties to even).
SPARSENET_HD uint16_t bf16_bits(float x) {
    const uint32_t u = float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN: quiet
    const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(rounded >> 16);
}

// The float a BF16 bit pattern stands for (exact).
SPARSENET_HD float bf16_to_float(uint16_t h) {
    return bits_float(uint32_t(h) << 16);
}

// x rounded to BF16, kept as a float: what the CPU backend feeds its sgemm in bf16 mode.
SPARSENET_HD float round_bf16(float x) {
    return bf16_to_float(bf16_bits(x));
}

}  // namespace sparsenet::formulas
