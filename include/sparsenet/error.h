// sparsenet::Error: the one exception type the library throws.
#pragma once

#include <stdexcept>
#include <string>

namespace sparsenet {

// What kind of thing went wrong; the CLI maps categories to exit codes.
enum class ErrorCategory {
    kConfig,          // network JSON: syntax, unknown key, wrong type, bad value
    kData,            // dataset contents: shapes, indices out of range, names not found
    kIo,              // files: missing, unreadable, corrupt, truncated, not netCDF
    kDevice,          // backend: out of memory, no such device, driver errors
    kCommunication,   // MPI / NCCL
    kNumeric,         // training diverged: a NaN or an infinity in the loss or the parameters
    kUsage,           // API or command line misuse (bad flag, missing argument)
    kNotImplemented,  // a DSSTNE feature this version does not implement yet
    kInternal,        // a broken invariant: a bug in sparsenet
};

const char* to_string(ErrorCategory category);

// Messages name the file, line or JSON path, the offending value and what was expected.
class Error : public std::runtime_error {
  public:
    Error(ErrorCategory category, const std::string& message)
        : std::runtime_error(message), category_(category) {}
    ErrorCategory category() const { return category_; }

  private:
    ErrorCategory category_;
};

}  // namespace sparsenet
