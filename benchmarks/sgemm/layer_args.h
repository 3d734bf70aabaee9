// What the per-layer rate programs share (sgemm_rate.cpp, bf16_matmul_rate.cpp): their command
// line, BATCH IN OUT [threads=2] [repeats=5] [pad=0], and the median of the timed calls.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace sparsenet::bench
