// Host-side seeded random numbers with results fixed by this code (std::*_distribution results
// are implementation-defined, so they are not used where reproducibility matters).
#pragma once

#include <cmath>
#include <cstdint>

#include "formulas/rng.h"

namespace sparsenet::engine {

class HostRng {
  public:
    explicit HostRng(uint64_t seed) : state_(seed) {}
    // Skips n draws of next() (a split network generates only its block of a matrix).
    void skip(uint64_t n) { state_ += n * 0x9E3779B97F4A7C15ull; }
    uint64_t next() {
        state_ += 0x9E3779B97F4A7C15ull;
        return formulas::mix64(state_);
    }
    double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
    uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
    double normal() {  // Box-Muller: two draws
        const double u1 = 1.0 - uniform();
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

  private:
    uint64_t state_;
};

}  // namespace sparsenet::engine
