// Optimizer names, defaults and option validation (include/sparsenet/optimizer.h).
#include "sparsenet/optimizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "formulas/optimizer.h"
#include "sparsenet/error.h"

namespace sparsenet {

namespace {

std::string lower(const std::string& s) {
    std::string r = s;
    std::transform(r.begin(), r.end(), r.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return r;
}

constexpr OptimizerKind kAllKinds[] = {OptimizerKind::kSgd,      OptimizerKind::kMomentum,
                                       OptimizerKind::kNesterov, OptimizerKind::kAdaGrad,
                                       OptimizerKind::kRmsProp,  OptimizerKind::kAdaDelta,
                                       OptimizerKind::kAdam,     OptimizerKind::kAdamW};

std::string format(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", double(v));
    return buf;
}

}  // namespace

const char* to_string(OptimizerKind v) {
    switch (v) {
        case OptimizerKind::kSgd:
            return "sgd";
        case OptimizerKind::kMomentum:
            return "momentum";
        case OptimizerKind::kAdam:
            return "adam";
        case OptimizerKind::kNesterov:
            return "nesterov";
        case OptimizerKind::kAdaGrad:
            return "adagrad";
        case OptimizerKind::kRmsProp:
            return "rmsprop";
        case OptimizerKind::kAdaDelta:
            return "adadelta";
        case OptimizerKind::kAdamW:
            return "adamw";
    }
    return "unknown";
}

const char* to_string(SparseUpdate v) {
    return v == SparseUpdate::kLazy ? "lazy" : "exact";
}

OptimizerKind optimizer_from_string(const std::string& name) {
    const std::string l = lower(name);
    std::string valid;
    for (OptimizerKind k : kAllKinds) {
        if (l == to_string(k)) return k;
        valid += std::string(valid.empty() ? "" : ", ") + to_string(k);
    }
    throw Error(ErrorCategory::kUsage,
                "unknown optimizer '" + name + "'; expected one of: " + valid);
}

SparseUpdate sparse_update_from_string(const std::string& name) {
    const std::string l = lower(name);
    if (l == "exact") return SparseUpdate::kExact;
    if (l == "lazy") return SparseUpdate::kLazy;
    throw Error(ErrorCategory::kUsage,
                "unknown sparse update mode '" + name + "'; expected one of: exact, lazy");
}

int optimizer_state_slots(OptimizerKind kind) {
    return formulas::optimizer_state_slots(kind);
}

float default_epsilon(OptimizerKind kind) {
    switch (kind) {
        case OptimizerKind::kAdam:
        case OptimizerKind::kAdamW:
            return 1e-8f;
        case OptimizerKind::kAdaGrad:
        case OptimizerKind::kRmsProp:
        case OptimizerKind::kAdaDelta:
            return 1e-9f;
        case OptimizerKind::kSgd:
        case OptimizerKind::kMomentum:
        case OptimizerKind::kNesterov:
            return 0.0f;
    }
    return 0.0f;
}

bool operator==(const OptimizerOptions& a, const OptimizerOptions& b) {
    return a.kind == b.kind && a.learning_rate == b.learning_rate && a.mu == b.mu &&
           a.mu1 == b.mu1 && a.epsilon == b.epsilon && a.l2 == b.l2 && a.l1 == b.l1 &&
           a.sparse_update == b.sparse_update;
}

void validate(const OptimizerOptions& o) {
    auto fail = [](const std::string& name, float v, const char* expected) {
        throw Error(ErrorCategory::kUsage, "optimizer option " + name + " = " + format(v) +
                                               " is out of range; expected " + expected);
    };
    if (!(o.learning_rate >= 0.0f) || !std::isfinite(o.learning_rate))
        fail("learning rate (alpha)", o.learning_rate, "a finite number >= 0");
    if (!(o.mu >= 0.0f && o.mu < 1.0f)) fail("mu", o.mu, "a number in [0, 1)");
    if (!(o.mu1 >= 0.0f && o.mu1 < 1.0f)) fail("mu1", o.mu1, "a number in [0, 1)");
    if (o.epsilon && (!(*o.epsilon > 0.0f) || !std::isfinite(*o.epsilon)))
        fail("epsilon", *o.epsilon, "a finite number > 0");
    if (!(o.l2 >= 0.0f) || !std::isfinite(o.l2)) fail("L2 (lambda)", o.l2, "a finite number >= 0");
    if (!(o.l1 >= 0.0f) || !std::isfinite(o.l1)) fail("L1 (lambda1)", o.l1, "a finite number >= 0");
}

}  // namespace sparsenet
