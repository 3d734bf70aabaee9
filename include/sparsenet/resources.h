// Facts for the messages of resource errors, for programs that write files or report memory as
// the library does (the CLI uses them for its recs and report files): sizes in readable units,
// why a write may have failed (free space, ulimit -f), making a renamed file durable, and the
// advice that ends every out-of-memory message.
#pragma once

#include <cstdint>
#include <string>

namespace sparsenet {

// "512.0 MiB": bytes in the largest binary unit that keeps the number >= 1 (B, KiB ... EiB).
std::string format_bytes(uint64_t bytes);

// What may explain a failed write of `path`, for its message: "; <dir> has 12.0 KiB free of
// 1.0 MiB", and "; the file size limit (ulimit -f) is 100.0 KiB" when one is set. "" when
// nothing can be found out. errno is left as it was.
std::string storage_hint(const std::string& path);

// After `path` was renamed into place: flushes its directory so the rename is durable. false with
// errno set on failure; a file system that cannot sync a directory (EINVAL) counts as success.
bool sync_parent_directory(const std::string& path);

// The advice that ends every out-of-memory message of the library (Error(kDevice)) and of the
// CLI's std::bad_alloc report: a smaller --batch, a smaller network, or the network split over
// more ranks (docs/parallelism.md).
extern const char* const kOutOfMemoryAdvice;

}  // namespace sparsenet
