// Times Dataset::read (open, read every variable, validate, sort check) on one file: prints
// the median and min of --repeat runs as one JSON object on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s FILE.nc [repeats=5]\n", argv[0]);
        return 2;
    }
    const std::string path = argv[1];
    const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
    try {
        std::vector<double> seconds;
        uint64_t nnz = 0, rows = 0;
        for (int i = 0; i < repeats; ++i) {
            const auto start = std::chrono::steady_clock::now();
            const sparsenet::Dataset d = sparsenet::Dataset::read(path);
            seconds.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
            nnz = d.nnz();
            rows = d.rows;
        }
        std::sort(seconds.begin(), seconds.end());
        std::printf(
            "{\"file\": \"%s\", \"rows\": %llu, \"nnz\": %llu, \"repeats\": %d, "
            "\"median_s\": %.4f, \"min_s\": %.4f}\n",
            path.c_str(), (unsigned long long)rows, (unsigned long long)nnz, repeats,
            seconds[seconds.size() / 2], seconds.front());
        return 0;
    } catch (const sparsenet::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
