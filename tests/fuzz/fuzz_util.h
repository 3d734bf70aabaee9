// Helpers shared by the libFuzzer targets of tests/fuzz.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sparsenet_fuzz {

// A file the readers can open by path, rewritten for every input: on tmpfs (/dev/shm) when it is
// writable, else in $TMPDIR or /tmp. One per process (the pid is in the name), removed at exit.
class ScratchFile {
  public:
    explicit ScratchFile(const std::string& suffix) {
        std::string dir = "/dev/shm";
        if (access(dir.c_str(), W_OK) != 0) {
            const char* tmp = std::getenv("TMPDIR");
            dir = tmp != nullptr ? tmp : "/tmp";
        }
        path_ = dir + "/sparsenet-fuzz-" + std::to_string(getpid()) + suffix;
    }
    ~ScratchFile() { std::remove(path_.c_str()); }
    ScratchFile(const ScratchFile&) = delete;
    ScratchFile& operator=(const ScratchFile&) = delete;

    // Replaces the file's contents with the bytes; aborts when it cannot (not an input's fault).
    const std::string& write(const uint8_t* data, size_t size) const {
        FILE* f = std::fopen(path_.c_str(), "wb");
        if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) ||
            std::fclose(f) != 0) {
            std::perror(path_.c_str());
            std::abort();
        }
        return path_;
    }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

}  // namespace sparsenet_fuzz
