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

// IEEE binary16 (fp16: 5 exponent bits, 10 stored significand bits), the CPU's fp16 screen's
// weights (src/engine/output_screen.h). Plain integer arithmetic instead of the compiler's
// _Float16, which GCC 11 and Clang 14 lack on x86-64 (and builds without -mf16c would otherwise
// need): the same bits as _Float16 and as F16C's vcvtps2ph / vcvtph2ps, checked on every fp16
// value and on random floats (tests/library/precision_test.cpp).
//
// float -> fp16: to nearest, ties to even; from 65520 (half an ulp above the largest finite,
// 65504) up the result is infinity; below 2^-14 a subnormal (multiples of 2^-24), 2^-25 and less
// rounding to zero; a NaN stays a NaN, made quiet, its payload's upper bits and sign kept.
SPARSENET_HD uint16_t fp16_bits(float x) {
    const uint32_t u = float_bits(x);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // infinity, or rounds to it
    if (a >= 0x38800000u) {  // a normal fp16: rebias the exponent (127 - 15), round 13 bits off
        const uint32_t rounded = a + 0x0fffu + ((a >> 13) & 1u);  // a carry bumps the exponent
        return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
    }
    const uint32_t e = a >> 23;
    if (e < 102) return sign;  // below 2^-25 (and 2^-25 itself, a tie): zero
    // Subnormal: the significand (implicit bit set) in units of 2^-24 is m >> (126 - e).
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 .. 24
    uint32_t q = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;  // may reach 0x400: the smallest normal
    return uint16_t(sign | q);
}

// The float an fp16 bit pattern stands for (exact; a NaN made quiet, payload and sign kept).
SPARSENET_HD float fp16_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m ? 0x400000u : 0u) | (m << 13));
    if (e != 0) return bits_float(sign | ((e + 112) << 23) | (m << 13));
    // Zero or subnormal: m * 2^-24, exact in float (m < 2^10).
    const float magnitude = float(m) * 0x1p-24f;
    return bits_float(sign | float_bits(magnitude));
}

}  // namespace sparsenet::formulas
