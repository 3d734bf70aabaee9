#include "sparsenet/error.h"

namespace sparsenet {

const char* to_string(ErrorCategory category) {
    switch (category) {
        case ErrorCategory::kConfig:
            return "config";
        case ErrorCategory::kData:
            return "data";
        case ErrorCategory::kIo:
            return "io";
        case ErrorCategory::kDevice:
            return "device";
        case ErrorCategory::kCommunication:
            return "communication";
        case ErrorCategory::kNumeric:
            return "numeric";
        case ErrorCategory::kUsage:
            return "usage";
        case ErrorCategory::kNotImplemented:
            return "not implemented";
        case ErrorCategory::kInternal:
            return "internal";
    }
    return "unknown";
}

}  // namespace sparsenet
