// Compiles every host/device formula for the GPU. The CPU backend runs the same functions, so
// this file proves the "one formula, two executors" rule holds at build time. The CUDA backend's
// kernels (kernels/cuda_*.cu, one file per op family) call the same functions.
#include "formulas/activation.h"
#include "formulas/dropout.h"
#include "formulas/loss.h"
#include "formulas/optimizer.h"
#include "formulas/precision.h"
#include "formulas/regularizer.h"
#include "formulas/rng.h"

namespace sparsenet {

// Every activation kind, forward and backward, for float and double.
template <typename T>
__device__ T every_activation(T z) {
    T sum = T(0);
    for (int k = 0; k <= int(Activation::kSoftSign); ++k) {
        formulas::ActivationParams act;
        act.kind = Activation(k);
        const T a = formulas::activate(act, z);
        sum += a + formulas::derivative_from_output(act, a);
    }
    return sum;
}

// Every loss kind, value, gradient and output delta.
template <typename T>
__device__ T every_loss(formulas::LossParams loss, T a, T t) {
    T sum = T(0);
    formulas::ActivationParams act;
    for (int k = 0; k <= int(ErrorFunction::kDataScaledMarginalCrossEntropy); ++k) {
        loss.kind = ErrorFunction(k);
        sum += formulas::loss_element(loss, a, t) + formulas::loss_grad_element(loss, a, t) +
               formulas::output_delta_element(loss, act, a, t);
    }
    return sum + formulas::softmax_delta_element(a, t, a) +
           formulas::multinomial_delta_element(a, t, t);
}

// Every optimizer kind, two steps, with L1/L2, for float and double.
template <typename T>
__device__ T every_optimizer(formulas::OptimizerStep step, T w, T g) {
    T sum = T(0);
    for (int k = 0; k <= int(OptimizerKind::kAdamW); ++k) {
        step.kind = OptimizerKind(k);
        T wk = w, s1 = T(0), s2 = T(0);
        formulas::optimizer_update(step, wk, g, s1, s2);
        formulas::optimizer_update(step, wk, -g, s1, s2);
        sum += wk + s1 + s2 + T(formulas::optimizer_state_slots(step.kind)) +
               T(formulas::zero_gradient_is_noop(step) ? 1 : 0);
    }
    return sum;
}

template <typename T>
__device__ T regularizers(T a) {
    const T rho = formulas::sparseness_clamp(a);
    return formulas::sparseness_kl(T(0.1), rho) + formulas::sparseness_kl_grad(T(0.1), rho) +
           formulas::norm_clip_factor(a * a, T(0.5));
}

__global__ void formulas_check_kernel(formulas::LossParams loss, formulas::OptimizerStep step,
                                      formulas::DropoutParams dropout, const float* a, float* out,
                                      double* out_d, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bool keep = formulas::keep_unit(dropout.seed, i, i, dropout.p);
    const float t = keep ? 1.0f : 0.0f;
    float w = a[i], s1 = 0.0f, s2 = 0.0f;
    formulas::ActivationParams sigmoid;
    formulas::optimizer_update(step, w, formulas::output_delta_element(loss, sigmoid, a[i], t), s1,
                               s2);
    const float y = formulas::dropout_forward(dropout, keep, a[i]);
    out[i] = w + every_activation(a[i]) + every_loss(loss, a[i], t) + regularizers(a[i]) + y +
             formulas::dropout_input(dropout, y) + every_optimizer(step, a[i], t) +
             formulas::round_bf16(a[i]);
    const double ad = double(a[i]);
    out_d[i] = every_activation(ad) + every_loss(loss, ad, double(t)) + regularizers(ad) +
               every_optimizer(step, ad, double(t));
}

// Host-side parameter builders are host/device too.
__global__ void dropout_params_kernel(float p, uint64_t seed, formulas::DropoutParams* out) {
    out[0] = formulas::inverted_dropout(p, seed);
    out[1] = formulas::alpha_dropout(p, seed, -1.7580993f);
}

}  // namespace sparsenet
