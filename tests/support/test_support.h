// Helpers shared by the tests: temporary directories and small datasets.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"

namespace sparsenet::testing {

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

  private:
    std::string path_;
};

// Row-length shapes the op tests sweep over.
enum class RowShape { kEmptyRows, kOneNonzero, kPowerLaw, kUniform };

// A random CSR dataset with the given row-length shape; boolean unless with_values.
Dataset random_dataset(uint64_t rows, uint32_t cols, RowShape shape, bool with_values,
                       uint64_t seed, const std::string& name = "data");

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);

// Runs a shell command, capturing stdout+stderr; returns the exit status (not the raw wait code).
int run_command(const std::string& command, std::string* output);

}  // namespace sparsenet::testing
