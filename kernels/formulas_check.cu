// Compiles every host/device formula for the GPU. The CPU backend runs the same functions, so
// this file proves the "one formula, two executors" rule holds at build time. The CUDA backend
// proper (its kernels, one file per op family) is a later piece of work.
#include "formulas/activation.h"
#include "formulas/loss.h"
#include "formulas/optimizer.h"
#include "formulas/rng.h"

namespace sparsenet {

__global__ void formulas_check_kernel(formulas::LossParams loss, formulas::OptimizerStep step,
                                      const float* a, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float t = formulas::keep_unit(7, i, i, 0.5f) ? 1.0f : 0.0f;
    float w = a[i], s1 = 0.0f, s2 = 0.0f;
    formulas::optimizer_update(
        step, w, formulas::output_delta_element(loss, Activation::kSigmoid, a[i], t), s1, s2);
    out[i] = w + formulas::loss_element(loss, formulas::activate(Activation::kTanh, a[i]), t) +
             formulas::derivative_from_output(Activation::kRectifiedLinear, a[i]);
}

}  // namespace sparsenet
