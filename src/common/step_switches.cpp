#include "sparsenet/step_switches.h"

#include <cstdlib>
#include <cstring>

namespace sparsenet {

namespace {

bool on(const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace

StepSwitches StepSwitches::from_environment() {
    StepSwitches s;
    s.padded_ld = on("SPARSENET_PADDED_LD");
    s.fused_update = on("SPARSENET_FUSED_UPDATE");
    s.fused_epilogue = on("SPARSENET_FUSED_EPILOGUE");
    s.fused_sparse_step = on("SPARSENET_FUSED_SPARSE_STEP");
    s.delta_over_activation = on("SPARSENET_DELTA_OVER_ACTIVATION");
    s.row_catch_up = on("SPARSENET_ROW_CATCH_UP");
    s.bf16_weight_copies = on("SPARSENET_BF16_WEIGHT_COPIES");
    s.bf16_activation_copies = on("SPARSENET_BF16_ACTIVATION_COPIES");
    return s;
}

const StepSwitches& StepSwitches::process() {
    static const StepSwitches switches = from_environment();
    return switches;
}

}  // namespace sparsenet
