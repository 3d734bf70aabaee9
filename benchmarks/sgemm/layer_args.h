// What the per-layer rate programs share (sgemm_rate.cpp, bf16_matmul_rate.cpp): their command
// line, BATCH IN OUT [threads=2] [repeats=5] [pad=0], the median of the timed calls, and
// buffers allocated as the engine's.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include "backend/cpu/host_memory.h"

namespace sparsenet::bench {

struct LayerArgs {
    int batch = 0, in = 0, out = 0;
    int threads = 2;
    int repeats = 5;
    int pad = 0;  // only where the program takes it
};

// The arguments, or a usage message on stderr and false.
inline bool parse_layer_args(int argc, char** argv, bool takes_pad, LayerArgs* a) {
    const char* usage = takes_pad ? "BATCH IN OUT [threads=2] [repeats=5] [pad=0]"
                                  : "BATCH IN OUT [threads=2] [repeats=5]";
    if (argc < 4 || argc > (takes_pad ? 7 : 6)) {
        std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return false;
    }
    a->batch = std::atoi(argv[1]);
    a->in = std::atoi(argv[2]);
    a->out = std::atoi(argv[3]);
    if (argc > 4) a->threads = std::atoi(argv[4]);
    if (argc > 5) a->repeats = std::atoi(argv[5]);
    if (argc > 6) a->pad = std::atoi(argv[6]);
    if (a->batch < 1 || a->in < 1 || a->out < 1 || a->threads < 1 || a->repeats < 1 || a->pad < 0) {
        std::fprintf(stderr, "%s: BATCH, IN, OUT, threads and repeats must be >= 1, pad >= 0\n",
                     argv[0]);
        return false;
    }
    return true;
}

// A buffer allocated as the engine's matrices are (CpuBackend::allocate, host_memory.h: 64-byte
// aligned, huge pages from 4 MiB). A plain std::vector of this size starts 16 bytes past a cache
// line (glibc's large blocks), and oneDNN's AMX matmul then ran 256 x 27280 x 1024 in 12.7 ms
// instead of 9.2 (its tile rows of C straddle two lines): the rate programs measured a case the
// engine never runs.
template <class T>
struct Aligned64 {
    using value_type = T;
    Aligned64() = default;
    template <class U>
    Aligned64(const Aligned64<U>&) {}
    T* allocate(size_t n) {
        if (n > ~size_t(0) / sizeof(T)) throw std::bad_alloc();
        void* p = cpu::host_allocate(n * sizeof(T));
        if (p == nullptr) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t) { std::free(p); }
    template <class U>
    bool operator==(const Aligned64<U>&) const {
        return true;
    }
    template <class U>
    bool operator!=(const Aligned64<U>&) const {
        return false;
    }
};
template <class T>
using AlignedVector = std::vector<T, Aligned64<T>>;

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace sparsenet::bench
