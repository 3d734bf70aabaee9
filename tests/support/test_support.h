// Helpers shared by the tests: temporary directories and small datasets.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/optimizer.h"

namespace sparsenet {
class Network;
class Trainer;
}  // namespace sparsenet

namespace sparsenet::testing {

// Sets (or, with nullptr, unsets) an environment variable for the scope and restores what it was
// after: the engine's switches (SPARSENET_*) and MPI launchers' variables in tests.
class ScopedEnv {
  public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value != nullptr) {
            setenv(name, value, 1);
        } else {
            unsetenv(name);
        }
    }
    ~ScopedEnv() {
        if (old_) {
            setenv(name_.c_str(), old_->c_str(), 1);
        } else {
            unsetenv(name_.c_str());
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    std::string name_;
    std::optional<std::string> old_;
};

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

// An optimizer of `kind` at learning rate lr, mu 0.9 (Momentum, Nesterov), L2 and L1 as given.
inline OptimizerOptions optimizer(OptimizerKind kind, float lr, float l2 = 0.0f, float l1 = 0.0f) {
    OptimizerOptions o;
    o.kind = kind;
    o.learning_rate = lr;
    o.mu = 0.9f;
    o.l2 = l2;
    o.l1 = l1;
    return o;
}

// Row-length shapes the op tests sweep over.
enum class RowShape { kEmptyRows, kOneNonzero, kPowerLaw, kUniform };

// A random CSR dataset with the given row-length shape; boolean unless with_values.
Dataset random_dataset(uint64_t rows, uint32_t cols, RowShape shape, bool with_values,
                       uint64_t seed, const std::string& name = "data");

// Central differences of trainer.compute_loss(first_row, count) against
// trainer.compute_gradients(first_row, count) for every weight of every parameter (step h),
// with EXPECT_NEAR at 2e-3 + 2e-2 * max(|numeric|, |analytic|). Returns the number of weights
// checked and, in *largest, the largest |numeric| seen (to show a check is not vacuous).
// Parameters named in `untrained` (FixedWeights matrices) must have no gradient and are skipped.
int check_gradients_numerically(Network& net, Trainer& trainer, uint64_t first_row, uint32_t count,
                                float h, double* largest = nullptr,
                                const std::set<std::string>& untrained = {});

// Runs f and expects an Error of `category` (a test failure otherwise); returns its message, or
// "" when nothing was thrown.
std::string expect_error(const std::function<void()>& f, ErrorCategory category);

bool contains(const std::string& text, const std::string& part);

// EXPECTs every field of the two datasets equal (`what` names the comparison in failures).
void expect_same_dataset(const Dataset& a, const Dataset& b, const std::string& what = "");

// The sparse autoencoder that several tests train (tests/data/configs/sparse_autoencoder.json:
// ScaledMarginalCrossEntropy, denoising, a Tanh hidden layer with dropout, a sigmoid output), as
// JSON, with `hidden` units in its hidden layer.
std::string sparse_autoencoder_json(uint32_t hidden = 48);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);

// Runs a shell command, capturing stdout+stderr; returns the exit status (not the raw wait code).
int run_command(const std::string& command, std::string* output);

}  // namespace sparsenet::testing
