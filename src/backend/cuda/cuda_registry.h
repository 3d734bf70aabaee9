// What src/backend/backend.cpp (make_backend) needs from the CUDA backend, without any CUDA
// header: device discovery that never throws or prints, and the factory. Only compiled when the
// build has CUDA (SPARSENET_WITH_CUDA).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace sparsenet::cuda {

// The number of CUDA devices the runtime reports. On a machine without a driver (or without a
// GPU) cudaGetDeviceCount fails; this returns 0 and, if why != nullptr, the call's error
// ("cudaGetDeviceCount: <error string> (<error name>)"). Never throws, prints nothing.
int device_count(std::string* why);

// Whether device `index` can run this build's kernels: its context starts and one of our kernels
// has an image for it (a build for sm_90 cannot run on an sm_80 GPU). Creates the device's
// primary context. Never throws; *why says what failed.
bool device_usable(int index, std::string* why);

// Device `index`'s name as the driver gives it ("NVIDIA H100 80GB HBM3"); "" when the runtime
// cannot say. Never throws.
std::string device_name(int index);

// The CUDA backend on device `index` (checked by the caller). Throws Error(kDevice) when a
// stream, the cuBLAS handle or the staging memory cannot be created.
std::unique_ptr<Backend> create_backend(int index);

// Starts device `index` ahead of create_backend, on the calling thread (predict runs it on a
// thread of its own while it reads files): the device's primary context, and cuBLAS loaded with
// one handle created and destroyed. Never throws; what fails shows again in create_backend.
void prepare_device(int index);

}  // namespace sparsenet::cuda
