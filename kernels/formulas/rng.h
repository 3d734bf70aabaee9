// Counter-based random numbers: the value for (seed, example, column) is a pure function, so the
// CPU and GPU, any thread count and any split of columns across ranks draw the same mask.
#pragma once

#include "formulas/common.h"

namespace sparsenet::formulas {

// splitmix64 finaliser: a bijective 64-bit mix with full avalanche.
SPARSENET_HD uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Stream seed for one use (epoch, layer, purpose) derived from the run seed.
SPARSENET_HD uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b) {
    return mix64(mix64(seed ^ mix64(a)) ^ mix64(b + 0x632BE59BD9B4E019ull));
}

// Uniform in [0, 1) with 24 bits, keyed by (seed, example row, global column).
SPARSENET_HD float uniform01(uint64_t seed, uint64_t row, uint64_t col) {
    const uint64_t h = mix64(seed ^ mix64((row << 32) ^ col));
    return float(h >> 40) * (1.0f / 16777216.0f);
}

// Inverted dropout / denoising: keep with probability 1-p; kept values are scaled by 1/(1-p).
SPARSENET_HD bool keep_unit(uint64_t seed, uint64_t row, uint64_t col, float p) {
    return uniform01(seed, row, col) >= p;
}

}  // namespace sparsenet::formulas
