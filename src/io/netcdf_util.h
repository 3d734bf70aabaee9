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

// The CDL name of a netCDF type ("float", "int64"); "string" for NC_STRING, "user-defined type"
// past it, "type <n>" for a number no netCDF type has (a corrupt header's).
inline std::string nc_type_name(int type) {
    switch (type) {
        case NC_BYTE:
            return "byte";
        case NC_CHAR:
            return "char";
        case NC_SHORT:
            return "short";
        case NC_INT:
            return "int";
        case NC_FLOAT:
            return "float";
        case NC_DOUBLE:
            return "double";
        case NC_UBYTE:
            return "ubyte";
        case NC_USHORT:
            return "ushort";
        case NC_UINT:
            return "uint";
        case NC_INT64:
            return "int64";
        case NC_UINT64:
            return "uint64";
        case NC_STRING:
            return "string";
        default:
            return type > NC_STRING ? "user-defined type" : "type " + std::to_string(type);
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
