// The one check for netCDF status codes: every nc_* call goes through nc_check.
#pragma once

#include <netcdf.h>

#include <string>

#include "sparsenet/error.h"

namespace sparsenet::io {

// Throws Error(kIo) "<path>: <what>: <netCDF's message>" when status != NC_NOERR.
inline void nc_check(int status, const std::string& path, const std::string& what) {
    if (status != NC_NOERR) {
        throw Error(ErrorCategory::kIo, path + ": " + what + ": " + nc_strerror(status));
    }
}

// Closes a netCDF id when the scope ends; errors while unwinding are ignored.
class NcFile {
  public:
    NcFile() = default;
    explicit NcFile(int id) : id_(id) {}
    NcFile(const NcFile&) = delete;
    NcFile& operator=(const NcFile&) = delete;
    ~NcFile() {
        if (id_ >= 0) nc_close(id_);
    }
    int id() const { return id_; }
    int* out() { return &id_; }
    // Closes now and reports the status (writes are flushed here).
    int close() {
        const int s = id_ >= 0 ? nc_close(id_) : NC_NOERR;
        id_ = -1;
        return s;
    }

  private:
    int id_ = -1;
};

}  // namespace sparsenet::io
