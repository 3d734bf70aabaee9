// Memory and storage facts for the messages of resource errors (out of memory, a full disk, a file
// size limit), and flushing files to the device before an atomic rename.
#pragma once

#include <cstdint>
#include <string>

namespace sparsenet {

// "512.0 MiB": bytes in the largest binary unit that keeps the number >= 1 (B, KiB ... EiB).
std::string format_bytes(uint64_t bytes);

namespace io {

// Flushes a file (directory: its entries) to the device. false with errno set on failure.
bool sync_path(const std::string& path, bool directory);

// After `path` was renamed into place: flushes its directory so the rename is durable. false with
// errno set on failure; a file system that cannot sync a directory (EINVAL) counts as success.
bool sync_parent_directory(const std::string& path);

// What may explain a failed write of `path`, for its message: "; <dir> has 12.0 KiB free of
// 1.0 MiB", and "; the file size limit (ulimit -f) is 100.0 KiB" when one is set. "" when
// nothing can be found out.
std::string storage_hint(const std::string& path);

}  // namespace io
}  // namespace sparsenet
