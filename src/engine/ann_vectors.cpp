// The ANN index's 16-bit item vectors (ann_vectors.h).
#include "engine/ann_vectors.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__F16C__))
#include <immintrin.h>
#endif

#include <cstring>
#include <type_traits>

#include "formulas/precision.h"
#include "sparsenet/error.h"

namespace sparsenet::engine {

#if defined(__AVX512F__)
namespace {
// maskz forms with every lane: the plain intrinsics' undefined passthrough makes GCC 12 warn
// (-Wmaybe-uninitialized, as in output_screen.cpp); the instructions are the same.
constexpr __mmask16 kAll = 0xffff;
__m512 bf16_lanes(__m256i x) {
    return _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, x), 16));
}
}  // namespace
#endif

const char* to_string(AnnVectors v) {
    switch (v) {
        case AnnVectors::kFp32:
            return "fp32";
        case AnnVectors::kFp16:
            return "fp16";
        case AnnVectors::kBf16:
            return "bf16";
    }
    return "?";
}

AnnVectors parse_ann_vectors(const std::string& s, const std::string& flag) {
    if (s == "fp32") return AnnVectors::kFp32;
    if (s == "fp16") return AnnVectors::kFp16;
    if (s == "bf16") return AnnVectors::kBf16;
    throw Error(ErrorCategory::kUsage,
                flag + " '" + s + "': expected fp32, fp16 or bf16 (how the ANN index stores " +
                    "the item vectors)");
}

uint16_t encode16(AnnVectors v, float x) {
    return v == AnnVectors::kBf16 ? formulas::bf16_bits(x) : formulas::fp16_bits(x);
}

float decode16(AnnVectors v, uint16_t h) {
    return v == AnnVectors::kBf16 ? formulas::bf16_to_float(h) : formulas::fp16_to_float(h);
}

void decode16(AnnVectors v, const uint16_t* in, size_t count, float* out) {
    size_t i = 0;
    if (v == AnnVectors::kBf16) {
#if defined(__AVX512F__)
        for (; i + 16 <= count; i += 16) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
            _mm512_storeu_ps(out + i, bf16_lanes(x));
        }
#endif
        for (; i < count; ++i) out[i] = formulas::bf16_to_float(in[i]);
        return;
    }
#if defined(__AVX512F__)
    for (; i + 16 <= count; i += 16) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
        _mm512_storeu_ps(out + i, _mm512_maskz_cvtph_ps(kAll, x));
    }
#elif defined(__AVX2__) && defined(__F16C__)
    for (; i + 8 <= count; i += 8) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(x));
    }
#endif
    for (; i < count; ++i) out[i] = formulas::fp16_to_float(in[i]);
}

namespace {

// The element type of each encoding: FP32 values as they are, 16-bit ones widened.
template <AnnVectors V>
using Stored = std::conditional_t<V == AnnVectors::kFp32, float, uint16_t>;

template <AnnVectors V>
float widen(Stored<V> h) {
    if constexpr (V == AnnVectors::kFp32) {
        return h;
    } else {
        return V == AnnVectors::kBf16 ? formulas::bf16_to_float(h) : formulas::fp16_to_float(h);
    }
}

#if defined(__AVX512F__)
template <AnnVectors V>
__m512 widen16(const Stored<V>* p) {
    if constexpr (V == AnnVectors::kFp32) {
        return _mm512_loadu_ps(p);
    } else if constexpr (V == AnnVectors::kBf16) {
        return bf16_lanes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
        return _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
}
#elif defined(__AVX2__) && defined(__F16C__)
template <AnnVectors V>
__m256 widen8(const Stored<V>* p) {
    if constexpr (V == AnnVectors::kFp32) {
        return _mm256_loadu_ps(p);
    } else {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        if constexpr (V == AnnVectors::kBf16) {
            return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
        } else {
            return _mm256_cvtph_ps(x);
        }
    }
}
#endif

template <AnnVectors V>
float l2(const Stored<V>* a, const Stored<V>* b, size_t dims) {
    size_t i = 0;
    float res = 0.0f;
#if defined(__AVX512F__)
    __m512 sum = _mm512_setzero_ps();
    for (; i + 16 <= dims; i += 16) {
        const __m512 d = _mm512_sub_ps(widen16<V>(a + i), widen16<V>(b + i));
        sum = _mm512_fmadd_ps(d, d, sum);
    }
    alignas(64) float lanes[16];  // (not _mm512_reduce_add_ps: GCC 12 warns inside it)
    _mm512_store_ps(lanes, sum);
    for (float x : lanes) res += x;
#elif defined(__AVX2__) && defined(__F16C__)
    __m256 sum = _mm256_setzero_ps();
    for (; i + 8 <= dims; i += 8) {
        const __m256 d = _mm256_sub_ps(widen8<V>(a + i), widen8<V>(b + i));
        sum = _mm256_add_ps(sum, _mm256_mul_ps(d, d));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, sum);
    for (float x : lanes) res += x;
#endif
    for (; i < dims; ++i) {
        const float d = widen<V>(a[i]) - widen<V>(b[i]);
        res += d * d;
    }
    return res;
}

}  // namespace

float l2_fp16(const uint16_t* a, const uint16_t* b, size_t dims) {
    return l2<AnnVectors::kFp16>(a, b, dims);
}

float l2_bf16(const uint16_t* a, const uint16_t* b, size_t dims) {
    return l2<AnnVectors::kBf16>(a, b, dims);
}

float l2_fp32(const float* a, const float* b, size_t dims) {
    return l2<AnnVectors::kFp32>(a, b, dims);
}

float dot_fp16(const float* q, const uint16_t* c, size_t dims) {
    size_t i = 0;
    float res = 0.0f;
#if defined(__AVX512F__)
    __m512 sum = _mm512_setzero_ps();
    for (; i + 16 <= dims; i += 16)
        sum = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), widen16<AnnVectors::kFp16>(c + i), sum);
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, sum);
    for (float x : lanes) res += x;
#elif defined(__AVX2__) && defined(__F16C__)
    __m256 sum = _mm256_setzero_ps();
    for (; i + 8 <= dims; i += 8)
        sum = _mm256_add_ps(
            sum, _mm256_mul_ps(_mm256_loadu_ps(q + i), widen8<AnnVectors::kFp16>(c + i)));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, sum);
    for (float x : lanes) res += x;
#endif
    for (; i < dims; ++i) res += q[i] * formulas::fp16_to_float(c[i]);
    return res;
}

uint32_t ann_dims(uint32_t width, AnnVectors v) {
    return v == AnnVectors::kFp32 ? (width + 2 + 15) / 16 * 16 : width + 2;
}

size_t ann_halves(uint32_t width) {
    return (size_t(width) + 1) / 2 * 2;
}

size_t ann_vector_bytes(AnnVectors v, uint32_t width) {
    return v == AnnVectors::kFp32 ? size_t(ann_dims(width, v)) * sizeof(float)
                                  : ann_halves(width) * sizeof(uint16_t) + 2 * sizeof(float);
}

void decode_stored(const char* x, AnnVectors v, uint32_t width, float* dst) {
    if (v == AnnVectors::kFp32) {
        std::memcpy(dst, x, (size_t(width) + 2) * sizeof(float));
        return;
    }
    decode16(v, reinterpret_cast<const uint16_t*>(x), width, dst);
    std::memcpy(dst + width, x + ann_halves(width) * sizeof(uint16_t), 2 * sizeof(float));
}

namespace {

float stored_fp32(const void* a, const void* b, const void* param) {
    return l2_fp32(static_cast<const float*>(a), static_cast<const float*>(b),
                   *static_cast<const size_t*>(param));
}

// 16-bit weights, then the FP32 bias and augmentation.
template <AnnVectors V>
float stored16(const void* a, const void* b, const void* param) {
    const size_t halves = *static_cast<const size_t*>(param);
    const auto* x = static_cast<const uint16_t*>(a);
    const auto* y = static_cast<const uint16_t*>(b);
    const float head = l2<V>(x, y, halves);
    float xt[2], yt[2];
    std::memcpy(xt, x + halves, sizeof xt);
    std::memcpy(yt, y + halves, sizeof yt);
    const float d0 = xt[0] - yt[0], d1 = xt[1] - yt[1];
    return head + d0 * d0 + d1 * d1;
}

}  // namespace

StoredDistance stored_distance(AnnVectors v, uint32_t width) {
    switch (v) {
        case AnnVectors::kFp16:
            return {&stored16<AnnVectors::kFp16>, ann_halves(width)};
        case AnnVectors::kBf16:
            return {&stored16<AnnVectors::kBf16>, ann_halves(width)};
        case AnnVectors::kFp32:
            break;
    }
    return {&stored_fp32, ann_dims(width, AnnVectors::kFp32)};
}

}  // namespace sparsenet::engine
