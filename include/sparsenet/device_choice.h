// What the "auto" device (Network, Recommender and the CLI's --device auto) took and why: a
// program that wants the choice on stderr or in its log installs a reporter here.
#pragma once

#include <string>

namespace sparsenet {

// How make_backend("auto") resolved. A machine without an NVIDIA GPU taking the CPU is the
// expected case; the CPU taken although the machine shows an NVIDIA GPU (no driver or one too old
// for this build's CUDA runtime, a GPU this build has no kernels for, a build without CUDA) is
// worth a word, with the CUDA runtime's own: otherwise a broken GPU setup trains on the CPU
// without anyone noticing.
enum class DeviceChoiceKind {
    kGpu,              // a GPU: "device auto -> cuda:0 (...)"
    kCpuNoGpu,         // the CPU; the machine shows no NVIDIA GPU
    kCpuGpuNotUsable,  // the CPU although the machine shows an NVIDIA GPU (the line says why)
};

// What make_backend("auto") took and why, as one line: "device auto -> cuda:0 (...)",
// "device auto -> cpu (no NVIDIA GPU found; ...)" or "device auto -> cpu (an NVIDIA GPU is present
// but ...)". The library prints nothing: a program that wants it (the CLI prints kGpu and
// kCpuGpuNotUsable on stderr, kCpuNoGpu only with --verbose) installs a reporter, which
// make_backend("auto") calls once per process (later resolutions repeat the first one's answer).
// nullptr removes it.
using DeviceChoiceReporter = void (*)(const std::string& line, DeviceChoiceKind kind);
void set_device_choice_reporter(DeviceChoiceReporter reporter);
// The line and kind of the last make_backend("auto") in this process ("" and kCpuNoGpu before the
// first).
std::string last_device_choice();
DeviceChoiceKind last_device_choice_kind();

// The kernel the CPU backend's BF16 GEMMs (--precision bf16 on the CPU) run in this process and
// why, as one line (docs/kernels.md, "BF16 GEMMs on the CPU"): "bf16 GEMMs -> onednn
// brg:avx512_core_amx_bf16 (CPU ISA avx512_core_amx: AMX)", or "bf16 GEMMs -> emulation (...)"
// with the reason. Decided once per process from what the CPU has; SPARSENET_CPU_BF16_KERNEL=
// onednn|emulation sets it (another value, or onednn where it cannot run, is Error(kUsage)).
std::string cpu_bf16_kernel_line();

}  // namespace sparsenet
