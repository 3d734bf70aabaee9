// Memory and storage facts for the messages of resource errors (out of memory, a full disk, a file
// size limit), and flushing files to the device before an atomic rename.
#pragma once

#include <cstdint>
#include <string>

#include "sparsenet/resources.h"  // format_bytes, storage_hint, sync_parent_directory

namespace sparsenet {
namespace io {

// Flushes a file (directory: its entries) to the device. false with errno set on failure.
bool sync_path(const std::string& path, bool directory);

// The public ones (include/sparsenet/resources.h), under the names the readers and writers use.
using sparsenet::storage_hint;
using sparsenet::sync_parent_directory;

}  // namespace io
}  // namespace sparsenet
