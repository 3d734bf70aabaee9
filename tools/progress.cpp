#include "progress.h"

#include <unistd.h>

#include "sparsenet/error.h"

namespace sparsenet::cli {
namespace {

std::string clock_text(double seconds) {
    const long s = static_cast<long>(seconds + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    return buf;
}

}  // namespace

Progress::Progress(uint32_t epochs, bool quiet, const std::string& metrics_path, bool append)
    : epochs_(epochs),
      quiet_(quiet),
      tty_(isatty(STDERR_FILENO) != 0),
      metrics_path_(metrics_path) {
    if (!metrics_path.empty()) {
        metrics_ = std::fopen(metrics_path.c_str(), append ? "a" : "w");
        if (metrics_ == nullptr) {
            throw Error(ErrorCategory::kIo, metrics_path + ": cannot open the metrics file");
        }
    }
}

Progress::~Progress() {
    if (metrics_ != nullptr) std::fclose(metrics_);
}

void Progress::on_batch(const BatchProgress& p) {
    if (quiet_ || !tty_) return;
    if (p.batch != p.batches && p.seconds - last_draw_ < 0.2) return;  // ~5 redraws a second
    last_draw_ = p.seconds;
    const int width = 24;
    const int done = static_cast<int>(width * double(p.batch) / double(p.batches));
    const double rate = p.seconds > 0 ? double(p.examples) / p.seconds : 0.0;
    const double eta = p.batch > 0 ? p.seconds * double(p.batches - p.batch) / double(p.batch) : 0;
    std::fprintf(stderr, "\repoch %u/%u [%s%s] batch %llu/%llu loss %.6f %.0f ex/s ETA %s\033[K",
                 p.epoch, epochs_, std::string(done, '=').c_str(),
                 std::string(width - done, ' ').c_str(), (unsigned long long)p.batch,
                 (unsigned long long)p.batches, p.loss, rate, clock_text(eta).c_str());
    std::fflush(stderr);
}

void Progress::on_epoch(const EpochStats& s, const std::string& note,
                        const std::string& json_fields) {
    if (!quiet_) {
        if (tty_) std::fputs("\r\033[K", stderr);
        std::printf("epoch %u/%u  loss %.6f  examples %llu  time %.2fs  %.0f examples/s\n", s.epoch,
                    epochs_, s.loss, (unsigned long long)s.examples, s.seconds,
                    s.examples_per_second);
        if (!note.empty()) std::printf("  %s\n", note.c_str());
        std::fflush(stdout);
    }
    last_draw_ = -1.0;
    if (metrics_ != nullptr) {
        std::fprintf(metrics_,
                     "{\"epoch\": %u, \"loss\": %.9g, \"examples\": %llu, \"seconds\": %.6f, "
                     "\"examples_per_second\": %.3f%s}\n",
                     s.epoch, s.loss, (unsigned long long)s.examples, s.seconds,
                     s.examples_per_second, json_fields.c_str());
        if (std::fflush(metrics_) != 0) {
            throw Error(ErrorCategory::kIo, metrics_path_ + ": write failed");
        }
    }
}

}  // namespace sparsenet::cli
