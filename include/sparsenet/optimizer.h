// Optimizer choice and hyper-parameters, named as DSSTNE's train flags (-alpha -lambda -lambda1
// -mu -mu1). docs/config-reference.md ("Optimizers") gives every update rule.
#pragma once

#include <optional>
#include <string>

namespace sparsenet {

// New kinds are appended (the values are stable).
enum class OptimizerKind {
    kSgd,
    kMomentum,
    kAdam,
    kNesterov,
    kAdaGrad,
    kRmsProp,
    kAdaDelta,
    kAdamW,
};

// What optimizer_step_rows does with the rows of a sparse-input weight matrix that the batch did
// not touch (zero gradient there). kExact: the dense update with that zero gradient (state decay,
// momentum steps, weight decay), so results equal the dense optimizer. kLazy: those rows and their
// state are left alone, as if the step had skipped them; cheaper (only the touched rows are
// visited) and different for every optimizer whose zero-gradient step is not a no-op.
enum class SparseUpdate { kExact, kLazy };

const char* to_string(OptimizerKind v);  // "sgd", "momentum", ... (CLI spelling)
const char* to_string(SparseUpdate v);   // "exact", "lazy"
// Case-insensitive; throw Error(kUsage) listing the valid names.
OptimizerKind optimizer_from_string(const std::string& name);
SparseUpdate sparse_update_from_string(const std::string& name);

// Number of state slots (each the size of the parameter) an optimizer keeps: SGD 0; Momentum,
// Nesterov, AdaGrad, RMSProp 1; AdaDelta, Adam, AdamW 2.
int optimizer_state_slots(OptimizerKind kind);

// The epsilon an optimizer uses when none is given: 1e-8 for Adam and AdamW (added to sqrt(v)),
// 1e-9 for AdaGrad, RMSProp and AdaDelta (a floor under the squared-gradient averages, as
// DSSTNE's kernels); unused (0) by SGD, Momentum and Nesterov.
float default_epsilon(OptimizerKind kind);

struct OptimizerOptions {
    OptimizerKind kind = OptimizerKind::kSgd;
    float learning_rate = 0.025f;  // DSSTNE's alpha (its -alpha default); >= 0
    // DSSTNE's mu, in [0, 1): the momentum (Momentum, Nesterov), the moving-average rate of the
    // squared gradients (RMSProp, AdaDelta), or beta1 (Adam, AdamW); unused by SGD and AdaGrad.
    float mu = 0.9f;
    // DSSTNE's mu1, in [0, 1): beta2 of Adam and AdamW; unused by the others.
    float mu1 = 0.999f;
    std::optional<float> epsilon;  // > 0; absent: default_epsilon(kind)
    // L2 (DSSTNE's lambda) and L1 (lambda1) regularisation of the weights (never the biases),
    // >= 0: lambda * w + lambda1 * sign(w) is added to the gradient; AdamW applies the same term
    // decoupled, outside its moments.
    float l2 = 0.0f;
    float l1 = 0.0f;
    SparseUpdate sparse_update = SparseUpdate::kExact;

    float resolved_epsilon() const { return epsilon ? *epsilon : default_epsilon(kind); }
};

bool operator==(const OptimizerOptions& a, const OptimizerOptions& b);
inline bool operator!=(const OptimizerOptions& a, const OptimizerOptions& b) {
    return !(a == b);
}

// Throws Error(kUsage) naming the first option out of range (learning_rate >= 0, mu and mu1 in
// [0, 1), epsilon > 0, l2 and l1 >= 0, every value finite).
void validate(const OptimizerOptions& options);

}  // namespace sparsenet
