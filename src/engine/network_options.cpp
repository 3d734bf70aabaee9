// NetworkOptions' closed sets (include/sparsenet/network.h): names and the CLI's spellings.
#include <cctype>
#include <string>

#include "sparsenet/error.h"
#include "sparsenet/network.h"

namespace sparsenet {
namespace {

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

const char* to_string(CommKind v) {
    switch (v) {
        case CommKind::kAuto:
            return "auto";
        case CommKind::kLocal:
            return "local";
        case CommKind::kMpi:
            return "mpi";
        case CommKind::kNccl:
            return "nccl";
    }
    return "unknown";
}

const char* to_string(ParallelMode v) {
    switch (v) {
        case ParallelMode::kAuto:
            return "auto";
        case ParallelMode::kModel:
            return "model";
        case ParallelMode::kData:
            return "data";
    }
    return "unknown";
}

CommKind parse_comm_kind(const std::string& text) {
    const std::string t = lower(text);
    for (CommKind k : {CommKind::kAuto, CommKind::kLocal, CommKind::kMpi, CommKind::kNccl}) {
        if (t == to_string(k)) return k;
    }
    throw Error(ErrorCategory::kUsage,
                "unknown communicator \"" + text + "\": expected auto, local, mpi or nccl");
}

ParallelMode parse_parallel_mode(const std::string& text) {
    const std::string t = lower(text);
    for (ParallelMode m : {ParallelMode::kAuto, ParallelMode::kModel, ParallelMode::kData}) {
        if (t == to_string(m)) return m;
    }
    throw Error(ErrorCategory::kUsage,
                "parallel mode '" + text + "' is unknown; expected auto, model or data");
}

}  // namespace sparsenet
