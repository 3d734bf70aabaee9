// The ANN index's stored item vectors (ann_index.h; docs/serving.md, "ANN index"): their layout,
// the 16-bit encodings (IEEE fp16 or BF16, formulas/precision.h, round to nearest even) and the
// squared L2 distance between two stored vectors, 16-bit values widened to FP32 on the fly and
// summed in FP32: the distance of every kind's build and search (ivf and flat call it directly,
// hnsw through hnswlib's space, ann_hnsw.cpp).
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
// The same over FP32 values (16 or 8 lanes, as above).
float l2_fp32(const float* a, const float* b, size_t dims);
// sum over i < dims of q[i] * decode16(kFp16, c[i]), in FP32 (lanes as above).
float dot_fp16(const float* q, const uint16_t* c, size_t dims);

// The stored layout of item j: x_j = [w_j, b_j, sqrt(R^2 - |v_j|^2)] (ann_index.h). FP32: dims =
// width + 2 values rounded up to 16 (whole blocks for the lanes above), the padding 0. 16 bits:
// the width weights encoded, padded to an even count ("halves"), then the bias and the
// augmentation in FP32 (rounding those two quantised the band of norms the augmentation works in
// into shells a graph search could not cross: recall@100 0.97 -> 0.21 at efSearch 256 on a
// briefly trained model with every b near -4).
uint32_t ann_dims(uint32_t width, AnnVectors v);        // values of a stored vector
size_t ann_halves(uint32_t width);                      // 16-bit values before the FP32 tail
size_t ann_vector_bytes(AnnVectors v, uint32_t width);  // bytes of a stored vector
// Stored vector `x` widened: [w, b, augmentation] (width + 2 FP32 values) into dst.
void decode_stored(const char* x, AnnVectors v, uint32_t width, float* dst);

// The distance between two stored vectors (hnswlib's DISTFUNC signature: a, b, param).
using AnnDistance = float (*)(const void*, const void*, const void*);
// Squared L2 between two stored vectors of `v`'s layout for `width` source units; `param` is
// to be passed to each call (it points to a size_t: the FP32 dims or the 16-bit halves).
struct StoredDistance {
    AnnDistance func = nullptr;
    size_t param = 0;
};
StoredDistance stored_distance(AnnVectors v, uint32_t width);

}  // namespace sparsenet::engine
