// predict's text writer alone (tools/recs_output.cpp, write_recs_text): the top-K lists of the
// ML-20M shape (138,493 rows of 100 entries by default) formatted and written to a file with 1
// and 2 OpenMP threads (or the counts given), runs alternating between the counts, each run's
// file compared with the first thread count's byte for byte. Per run: the seconds of
// write_recs_text (formatting and writev, what `predict --timings` calls write) and of the
// fsync after it, and the file's bytes. One JSON object on stdout. --out /dev/null measures the
// formatting and the system calls without a file (no fsync, nothing compared).
//
//   sparsenet_bench_recs_writer --out FILE [--rows 138493] [--k 100] [--items 27278]
//       [--threads 1,2] [--repeats 3] [--format .6g] [--dsstne]
//
// The scores are sigmoid-like (uniform in (0, 1), descending per row), the items uniform over
// the items: the text a trained model's recs file holds is of the same length per entry.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "recs_output.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "sparsenet_bench_recs_writer: %s\n", what.c_str());
    std::exit(2);
}

std::string read_all(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) die("cannot read " + path);
    std::string s;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    uint64_t rows = 138493;
    uint32_t k = 100, items = 27278;
    int repeats = 3;
    std::string out_path, format = ".6g", thread_list = "1,2";
    bool dsstne = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die("option " + a + " needs a value");
            return argv[++i];
        };
        if (a == "--out") {
            out_path = value();
        } else if (a == "--rows") {
            rows = std::stoull(value());
        } else if (a == "--k") {
            k = uint32_t(std::stoul(value()));
        } else if (a == "--items") {
            items = uint32_t(std::stoul(value()));
        } else if (a == "--threads") {
            thread_list = value();
        } else if (a == "--repeats") {
            repeats = std::stoi(value());
        } else if (a == "--format") {
            format = value();
        } else if (a == "--dsstne") {
            dsstne = true;
        } else {
            die("unknown option " + a);
        }
    }
    if (out_path.empty()) die("give --out FILE (a file on the disk to measure)");
    std::vector<int> counts;
    {
        std::stringstream ss(thread_list);
        std::string t;
        while (std::getline(ss, t, ',')) counts.push_back(std::stoi(t));
    }
    if (counts.empty() || k == 0 || items == 0) die("nothing to measure");

    sparsenet::TopK top;
    top.rows = rows;
    top.k = k;
    top.scores.resize(rows * k);
    top.indices.resize(rows * k);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::uniform_int_distribution<uint32_t> item(0, items - 1);
    for (uint64_t r = 0; r < rows; ++r) {
        float* s = top.scores.data() + r * k;
        for (uint32_t i = 0; i < k; ++i) s[i] = unit(rng);
        std::sort(s, s + k, [](float a, float b) { return a > b; });
        for (uint32_t i = 0; i < k; ++i) top.indices[r * k + i] = item(rng);
    }
    const std::vector<std::string> none;
    const sparsenet::cli::ScoreFormat score(format[0] == '%' ? format : "%" + format);
    const sparsenet::cli::RecsText recs{&top, &none, &none, &score, dsstne};

    const bool null_out = out_path == "/dev/null";
    std::string reference;
    std::ostringstream runs;
    bool identical = true;
    uint64_t bytes = 0;
    for (int rep = 0; rep < repeats; ++rep) {
        for (size_t c = 0; c < counts.size(); ++c) {
            omp_set_num_threads(counts[c]);
            const std::string tmp = null_out ? out_path : out_path + ".tmp";
            std::FILE* out = std::fopen(tmp.c_str(), "w");
            if (out == nullptr) die("cannot write " + tmp);
            const Clock::time_point t0 = Clock::now();
            if (!sparsenet::cli::write_recs_text(recs, out)) die("write error on " + tmp);
            const double write_s = seconds_since(t0);
            const Clock::time_point t1 = Clock::now();
            if (!null_out && (std::fflush(out) != 0 || ::fsync(fileno(out)) != 0))
                die("fsync of " + tmp);
            const double fsync_s = seconds_since(t1);
            std::fclose(out);
            if (null_out) {
                runs << (runs.tellp() > 0 ? ",\n    " : "    ") << "{\"threads\": " << counts[c]
                     << ", \"write_s\": " << write_s << "}";
                continue;
            }
            const std::string text = read_all(tmp);
            bytes = text.size();
            if (rep == 0 && c == 0) {
                reference = text;
            } else if (text != reference) {
                identical = false;
            }
            std::remove(tmp.c_str());
            runs << (runs.tellp() > 0 ? ",\n    " : "    ") << "{\"threads\": " << counts[c]
                 << ", \"write_s\": " << write_s << ", \"fsync_s\": " << fsync_s << "}";
        }
    }
    std::printf(
        "{\n  \"rows\": %llu, \"k\": %u, \"items\": %u, \"format\": \"%s\", \"dsstne\": %s,\n"
        "  \"bytes\": %llu, \"identical_across_thread_counts\": %s,\n  \"runs\": [\n%s\n  ]\n}\n",
        (unsigned long long)rows, k, items, score.format().c_str(), dsstne ? "true" : "false",
        (unsigned long long)bytes, identical ? "true" : "false", runs.str().c_str());
    return identical ? 0 : 1;
}
