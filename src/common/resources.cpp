#include "common/resources.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

namespace sparsenet {

std::string format_bytes(uint64_t bytes) {
    static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) return std::to_string(bytes) + " B";
    double value = double(bytes);
    int unit = 0;
    while (value >= 1024.0 && unit < 6) {
        value /= 1024.0;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
    return text;
}

namespace io {

bool sync_path(const std::string& path, bool directory) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0;
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return ok;
}

}  // namespace io

bool sync_parent_directory(const std::string& path) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    return io::sync_path(parent.empty() ? "." : parent.string(), true) || errno == EINVAL;
}

std::string storage_hint(const std::string& path) {
    const int saved = errno;
    std::string hint;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    const std::string dir = parent.empty() ? "." : parent.string();
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) == 0) {
        hint += "; " + dir + " has " + format_bytes(uint64_t(fs.f_bavail) * fs.f_frsize) +
                " free of " + format_bytes(uint64_t(fs.f_blocks) * fs.f_frsize);
    }
    rlimit limit{};
    if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        hint += "; the file size limit (ulimit -f) is " + format_bytes(limit.rlim_cur);
    }
    errno = saved;
    return hint;
}

}  // namespace sparsenet
