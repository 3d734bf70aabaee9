// Training progress: a live bar on a terminal, plain lines otherwise, JSON lines on request.
#pragma once

#include <cstdio>
#include <string>

#include "sparsenet/trainer.h"

namespace sparsenet::cli {

class Progress {
  public:
    // quiet: only errors. metrics_path: per-epoch JSON lines ("" = none), appended to an
    // existing file when append (a resumed run).
    Progress(uint32_t epochs, bool quiet, const std::string& metrics_path, bool append = false);
    ~Progress();
    void on_batch(const BatchProgress& p);
    // note: printed on its own line after the epoch's line ("" = none). json_fields: more
    // members of the epoch's JSON object, each starting with ", " (e.g. validation metrics).
    void on_epoch(const EpochStats& s, const std::string& note = "",
                  const std::string& json_fields = "");

  private:
    uint32_t epochs_;
    bool quiet_;
    bool tty_;
    double last_draw_ = -1.0;
    FILE* metrics_ = nullptr;
    std::string metrics_path_;
};

}  // namespace sparsenet::cli
