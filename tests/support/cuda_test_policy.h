// What a CUDA test does when it cannot get a CUDA backend: skip, or fail.
//
// A skip is only honest on a machine that has no GPU. With a GPU present (the driver reports at
// least one device) a backend that cannot be created is a broken setup (a missing libcublas, a
// build for the wrong architecture, an out-of-memory device), and reporting it as SKIPPED would
// make a broken GPU run look green. SPARSENET_REQUIRE_CUDA=1 in the environment turns every skip
// into a failure (the GPU validation run sets it): `SPARSENET_REQUIRE_CUDA=1 ctest -L cuda` fails
// on a machine without a GPU.
#pragma once

#include <string>

namespace sparsenet::testing {

enum class CudaUnavailable { kSkip, kFail };

// The decision, from its two inputs (a pure function, tested on the CPU).
CudaUnavailable cuda_unavailable_policy(bool require_env, int driver_devices);

// Whether SPARSENET_REQUIRE_CUDA is set to 1.
bool cuda_required_by_env();

// The number of CUDA devices the driver reports (0 in builds without CUDA and on machines without
// a driver; *why then says why when not null).
int cuda_driver_devices(std::string* why = nullptr);

// The message of a CUDA test that has no backend: what failed and, for a failure, why it is not
// a skip. `reason` is the backend's error.
std::string cuda_unavailable_message(CudaUnavailable decision, const std::string& reason);

}  // namespace sparsenet::testing

// In a test body or SetUp(): when the CUDA backend could not be created (reason = its error),
// skip on a machine without a GPU, fail otherwise (see above).
#define SPARSENET_CUDA_UNAVAILABLE(reason)                                                 \
    do {                                                                                   \
        const auto sparsenet_decision_ = ::sparsenet::testing::cuda_unavailable_policy(    \
            ::sparsenet::testing::cuda_required_by_env(),                                  \
            ::sparsenet::testing::cuda_driver_devices());                                  \
        const std::string sparsenet_message_ =                                             \
            ::sparsenet::testing::cuda_unavailable_message(sparsenet_decision_, (reason)); \
        if (sparsenet_decision_ == ::sparsenet::testing::CudaUnavailable::kFail) {         \
            FAIL() << sparsenet_message_;                                                  \
        }                                                                                  \
        GTEST_SKIP() << sparsenet_message_;                                                \
    } while (0)
