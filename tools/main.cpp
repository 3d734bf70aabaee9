// sparsenet: the command-line tool. One thin file per subcommand; the work is in the library.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "common.h"
#include "sparsenet/device_choice.h"
#include "sparsenet/job.h"

namespace sparsenet::cli {
int train_main(int argc, char** argv);
int predict_main(int argc, char** argv);
int generate_main(int argc, char** argv);
int evaluate_main(int argc, char** argv);
int info_main(int argc, char** argv);
int convert_main(int argc, char** argv);
int split_main(int argc, char** argv);
int serve_main(int argc, char** argv);
int ann_index_main(int argc, char** argv);
}  // namespace sparsenet::cli

namespace {

const char* kUsage =
    "usage: sparsenet <command> [options]\n"
    "\n"
    "commands:\n"
    "  train      train a network (DSSTNE JSON) on netCDF datasets, write a model file\n"
    "  predict    top-K recommendations per row, excluding the row's own items\n"
    "  evaluate   ranking metrics at several K of a model or a recs file on held-out items\n"
    "  generate   write a synthetic dataset with planted structure\n"
    "  info       summarise dataset or model files (kinds, sizes, row lengths, layers)\n"
    "  convert    interaction text files (DSSTNE, MovieLens, LightGCN) to a netCDF dataset\n"
    "  split      train/validation/test datasets by a standard evaluation protocol\n"
    "  serve      answer recommendation queries over HTTP (JSON), reloading the model live\n"
    "  ann-index  build the ANN index of a model's output layer (approximate top-K for serve)\n"
    "\n"
    "'sparsenet <command> --help' lists a command's options.\n";

}  // namespace

// OpenBLAS 0.3.21 does not recognise recent AVX-512 CPUs (Zen 5, Sapphire/Emerald Rapids)
// and falls back to slow kernels (measured: 66 GFLOP/s instead of 300 on this builder's 2
// cores). It reads OPENBLAS_CORETYPE when the library loads, before main(), so the tool sets it
// and re-executes itself once. Never forced without AVX-512 (SkylakeX kernels would SIGILL).
void select_openblas_kernels(char** argv) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
    if (!__builtin_cpu_supports("avx512f")) return;
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: carry on with the defaults
#else
    (void)argv;
#endif
}

// The command line after the OpenBLAS re-exec: one subcommand.
static int dispatch(int argc, char** argv) {
    using namespace sparsenet::cli;
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
        !std::strcmp(argv[1], "help")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::puts("sparsenet " SPARSENET_VERSION);
        return 0;
    }
    const std::string command = argv[1];
    // Only train and predict split a model over the ranks of an MPI job.
    if (sparsenet::launched_with_mpi() && command != "train" && command != "predict") {
        std::fprintf(stderr,
                     "sparsenet %s: error: runs as one process; start it without mpirun (only "
                     "train and predict split a model over MPI ranks)\n",
                     command.c_str());
        return 2;
    }
    if (command == "train") return train_main(argc - 2, argv + 2);
    if (command == "predict") return predict_main(argc - 2, argv + 2);
    if (command == "evaluate") return evaluate_main(argc - 2, argv + 2);
    if (command == "generate") return generate_main(argc - 2, argv + 2);
    if (command == "info") return info_main(argc - 2, argv + 2);
    if (command == "convert") return convert_main(argc - 2, argv + 2);
    if (command == "split") return split_main(argc - 2, argv + 2);
    if (command == "serve") return serve_main(argc - 2, argv + 2);
    if (command == "ann-index") return ann_index_main(argc - 2, argv + 2);
    std::fprintf(stderr, "sparsenet: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
}

// HDF5 (under netCDF-4) closes the files still open in an exit handler. A file whose nc_close
// failed (a write that hit a full disk or the file size limit) stays open inside HDF5, and HDF5
// 1.10's handler then crashes on it (SIGSEGV in H5F__close_cb, measured with `ulimit -f`): the
// CLI exited 139 after reporting the error. Every file the CLI writes is closed explicitly and
// checked, so the handler has nothing to do: it is turned off before the first netCDF call.
// H5dont_atexit is looked up at run time (the CLI does not link HDF5; netCDF built without HDF5
// has no such symbol and nothing to turn off).
void disable_hdf5_exit_handler() {
    using DontAtexit = int (*)();
    auto fn = reinterpret_cast<DontAtexit>(dlsym(RTLD_DEFAULT, "H5dont_atexit"));
    if (fn != nullptr) fn();
}

// `--device auto` (the default) says on stderr when it took a GPU, and when it took the CPU
// although the machine has an NVIDIA GPU, with the CUDA runtime's reason: a GPU machine whose
// CUDA setup is broken (no driver, no libcublas, a build for the wrong architecture) would
// otherwise train on the CPU without a word. On a machine without an NVIDIA GPU the CPU is the
// expected choice: said only with --verbose (every command of `make demo` used to start with
// the CUDA runtime's "driver version is insufficient", which read like a failure).
void report_device_choice(const std::string& line, sparsenet::DeviceChoiceKind kind) {
    if (kind == sparsenet::DeviceChoiceKind::kCpuNoGpu && !sparsenet::cli::verbose()) return;
    std::fprintf(stderr, "sparsenet: %s\n", line.c_str());
}

int main(int argc, char** argv) {
    select_openblas_kernels(argv);
    disable_hdf5_exit_handler();
    sparsenet::set_device_choice_reporter(report_device_choice);
    // Every command reports its own errors (run_command); this catches what escapes before one
    // runs (the command name, the mpirun check).
    try {
        return dispatch(argc, argv);
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "sparsenet: error: %s\n",
                     sparsenet::cli::host_out_of_memory_message().c_str());
        return 1;
    }
}
