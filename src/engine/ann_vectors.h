// The ANN index's item vectors in 16 bits (ann_index.h; docs/serving.md, "ANN index"): the
// encodings (IEEE fp16 or BF16, formulas/precision.h, round to nearest even) and the squared L2
// distance between two encoded vectors, widened to FP32 on the fly and summed in FP32. The
// hnswlib space of ann_index.cpp calls l2_fp16 or l2_bf16 for every distance of a build or a
// search; exposed
// here (without hnswlib) for its tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sparsenet::engine {

// How the index stores each item vector: FP32 (the model's own bits; 4 bytes a value), IEEE
// fp16 (11 significant bits, |x| < 65520) or BF16 (8 significant bits, FP32's range).
enum class AnnVectors : uint32_t { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

const char* to_string(AnnVectors v);
// "fp32" | "fp16" | "bf16"; Error(kUsage) naming `flag` and the choices otherwise.
AnnVectors parse_ann_vectors(const std::string& s, const std::string& flag = "--vectors");

// One value in a 16-bit encoding (kFp16 / kBf16) and back (exact).
uint16_t encode16(AnnVectors v, float x);
float decode16(AnnVectors v, uint16_t h);
// out[i] = decode16(v, in[i]) for i < count.
void decode16(AnnVectors v, const uint16_t* in, size_t count, float* out);

// sum over i < dims of (decode16(a[i]) - decode16(b[i]))^2, in FP32 (AVX-512 or AVX2+F16C lanes
// where the build has them: 16 or 8 partial sums, added at the end; a scalar loop otherwise).
// The widening is exact; the differences, squares and sums are FP32 arithmetic.
float l2_fp16(const uint16_t* a, const uint16_t* b, size_t dims);
float l2_bf16(const uint16_t* a, const uint16_t* b, size_t dims);

}  // namespace sparsenet::engine
