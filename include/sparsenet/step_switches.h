// The training step's switches (docs/gpu.md, "Switches of the training step"): each turns one of
// the step's optimisations off, to measure what it is worth or to rule it out when something looks
// wrong. Listed here once: the code reads these fields, tests set them, the docs' table names them.
#pragma once

namespace sparsenet {

// Every switch is on by default. StepSwitches::from_environment() reads the environment variable
// named beside each ("0" turns the switch off, anything else or unset leaves it on); the process's
// values (process(): from_environment() at the first call) are NetworkOptions' default, so the CLI
// follows the variables, and a program or test sets the fields of its own NetworkOptions. A
// network reads its switches when it is planned and at every step; they do not change afterwards.
struct StepSwitches {
    bool padded_ld = true;               // SPARSENET_PADDED_LD: rows padded to 16 floats
    bool fused_update = true;            // SPARSENET_FUSED_UPDATE: SGD/Momentum in the dW GEMM
    bool fused_epilogue = true;          // SPARSENET_FUSED_EPILOGUE: the output layer in one pass
    bool fused_sparse_step = true;       // SPARSENET_FUSED_SPARSE_STEP: sparse gradient + step
    bool delta_over_activation = true;   // SPARSENET_DELTA_OVER_ACTIVATION: delta in place
    bool row_catch_up = true;            // SPARSENET_ROW_CATCH_UP: exact sparse steps by clock
    bool bf16_weight_copies = true;      // SPARSENET_BF16_WEIGHT_COPIES: the weights' copies
    bool bf16_activation_copies = true;  // SPARSENET_BF16_ACTIVATION_COPIES: producers' copies

    static StepSwitches from_environment();
    static const StepSwitches& process();
};

}  // namespace sparsenet
