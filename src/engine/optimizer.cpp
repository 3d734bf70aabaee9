#include "sparsenet/optimizer.h"

#include <algorithm>
#include <cctype>

#include "sparsenet/error.h"

namespace sparsenet {

const char* to_string(OptimizerKind v) {
    switch (v) {
        case OptimizerKind::kSgd:
            return "sgd";
        case OptimizerKind::kMomentum:
            return "momentum";
        case OptimizerKind::kAdam:
            return "adam";
    }
    return "unknown";
}

OptimizerKind optimizer_from_string(const std::string& name) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "sgd") return OptimizerKind::kSgd;
    if (lower == "momentum") return OptimizerKind::kMomentum;
    if (lower == "adam") return OptimizerKind::kAdam;
    throw Error(ErrorCategory::kUsage,
                "unknown optimizer '" + name + "'; expected one of: sgd, momentum, adam");
}

}  // namespace sparsenet
