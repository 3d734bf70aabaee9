// main() of the tests/mpi/mpi_*_test.cpp programs, which mpirun starts on 1, 2 or 3 ranks
// (tests/CMakeLists.txt). Every rank runs every test; rank 0 prints GoogleTest's usual output,
// the other ranks print only their failures, prefixed with "[rank R]". The exit code is the
// largest over the ranks, so a failure on any rank fails the ctest test.
//
// MPI is initialised here, once per process, before any test, and finalised after the last:
// the library's MPI environment (src/comm/mpi_communicator.h) finds it initialised, uses it
// and leaves the finalisation to this main, as it does in any program that owns MPI.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {

// GoogleTest output of ranks other than 0: failed assertions only, with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
  public:
    explicit FailurePrinter(int rank) : rank_(rank) {}

    void OnTestPartResult(const ::testing::TestPartResult& result) override {
        if (!result.failed()) return;
        if (result.file_name() != nullptr) {
            std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name(),
                         result.line_number(), result.message());
        } else {
            std::fprintf(stderr, "[rank %d] unknown file: Failure\n%s\n", rank_, result.message());
        }
    }
    void OnTestEnd(const ::testing::TestInfo& info) override {
        if (info.result()->Failed()) {
            std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(),
                         info.name());
        }
    }

  private:
    int rank_;
};

// HDF5 keeps a netCDF-4 file whose close failed (a write over a file size limit) open, and HDF5
// 1.10's exit handler then crashes on it (docs/reliability.md); the tests that make a save fail
// need it off, as the CLI turns it off (tools/main.cpp): before the first HDF5 call, looked up at
// run time.
void disable_hdf5_exit_handler() {
    using DontAtexit = int (*)();
    auto fn = reinterpret_cast<DontAtexit>(dlsym(RTLD_DEFAULT, "H5dont_atexit"));
    if (fn != nullptr) fn();
}

}  // namespace

int main(int argc, char** argv) {
    disable_hdf5_exit_handler();
    ::testing::InitGoogleTest(&argc, argv);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) {
        ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new FailurePrinter(rank));
    }
    int code = RUN_ALL_TESTS();
    int worst = 0;
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && code == 0 && worst != 0) {
        std::fprintf(stderr, "FAILED on another rank: see the [rank R] lines\n");
    }
    MPI_Finalize();
    return worst;
}
