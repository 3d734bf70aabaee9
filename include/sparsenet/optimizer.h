// Optimizer choice and hyper-parameters (DSSTNE passes these on the command line, not in JSON).
#pragma once

#include <string>

namespace sparsenet {

enum class OptimizerKind { kSgd, kMomentum, kAdam };

const char* to_string(OptimizerKind v);
OptimizerKind optimizer_from_string(const std::string& name);  // case-insensitive; throws kUsage

struct OptimizerOptions {
    OptimizerKind kind = OptimizerKind::kSgd;
    float learning_rate = 0.025f;  // DSSTNE's -alpha default
    float momentum = 0.9f;         // Momentum's mu
    float beta1 = 0.9f;            // Adam
    float beta2 = 0.999f;          // Adam
    float epsilon = 1e-8f;         // Adam
    float l2 = 0.0f;               // L2 weight decay (DSSTNE's lambda), added to the gradient
};

}  // namespace sparsenet
