// What the "auto" device (Network, Recommender and the CLI's --device auto) took and why: a
// program that wants the choice on stderr or in its log installs a reporter here.
#pragma once

#include <string>

namespace sparsenet {

// What make_backend("auto") took and why, as one line: "device auto -> cuda:0 (...)" or
// "device auto -> cpu (no CUDA device: ...)". Silently falling back to the CPU hides a broken
// GPU setup (a missing libcublas looks like a CPU-only machine), so the choice is always
// available; but the library prints nothing: a program that wants it on stderr (the CLI) installs
// a reporter, which make_backend("auto") calls once per process (later resolutions repeat the
// first one's answer). nullptr removes it.
using DeviceChoiceReporter = void (*)(const std::string& line);
void set_device_choice_reporter(DeviceChoiceReporter reporter);
// The line of the last make_backend("auto") in this process ("" before the first).
std::string last_device_choice();

}  // namespace sparsenet
