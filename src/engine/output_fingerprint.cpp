#include "engine/output_fingerprint.h"

#include <cstring>

namespace sparsenet::engine {

namespace {

uint64_t mix(uint64_t h, uint64_t w) {
    h ^= w * 0x9E3779B97F4A7C15ull;
    h = (h << 31) | (h >> 33);
    return h * 0xBF58476D1CE4E5B9ull;
}

uint64_t hash_floats(uint64_t h, const float* p, size_t count) {
    size_t i = 0;
    for (; i + 2 <= count; i += 2) {
        uint64_t w;
        std::memcpy(&w, p + i, sizeof w);
        h = mix(h, w);
    }
    if (i < count) {
        uint32_t w;
        std::memcpy(&w, p + i, sizeof w);
        h = mix(h, w);
    }
    return h;
}

}  // namespace

OutputFingerprint::OutputFingerprint(uint32_t n, uint32_t k, bool transposed,
                                     Activation activation) {
    // A SoftMax layer is ranked as Linear logits (dense_output_edge), and hashed as such.
    const bool logits = activation == Activation::kSoftMax;
    h_ = mix(0x5350415253454E45ull, (uint64_t(n) << 32) | k);
    h_ = mix(h_, transposed ? 1 : 0);
    h_ = mix(h_, uint64_t(logits ? Activation::kLinear : activation));
    if (logits) h_ = mix(h_, 0x736f66746d6178ull);  // "softmax": ranked by logits
}

void OutputFingerprint::add_rows(const float* rows, size_t count, size_t cols, size_t ld) {
    for (size_t r = 0; r < count; ++r) h_ = hash_floats(h_, rows + r * ld, cols);
}

uint64_t OutputFingerprint::finish(const float* bias, size_t n) const {
    return hash_floats(h_, bias, n);
}

}  // namespace sparsenet::engine
