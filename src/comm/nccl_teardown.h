// How the NCCL communicator ends its ncclComm_t (src/comm/nccl_communicator.cpp), apart from NCCL
// itself so that the order can be tested without a GPU (tests/engine/nccl_teardown_test.cpp).
//
// Since NCCL 2.14 ncclCommDestroy only frees a communicator: the collectives still in flight and
// NCCL's proxy thread are flushed by ncclCommFinalize, and destroying a communicator that was not
// finalised can hang at exit (a proxy thread waiting on a peer that already left). So: finalise,
// then destroy. NCCL before 2.14 has no ncclCommFinalize (the symbol is looked up with dlsym and
// may be missing): there ncclCommDestroy still flushes, and is called alone. When finalising
// fails the communicator is aborted (ncclCommAbort never waits on peers) instead of destroyed.
#pragma once

namespace sparsenet::nccl {

// The three calls with NCCL's result codes as int (0 = ncclSuccess). finalize may be null.
template <class Comm, class Finalize, class Destroy, class Abort>
int finalize_and_destroy(Comm comm, Finalize finalize, Destroy destroy, Abort abort) {
    if (finalize != nullptr) {
        const int r = static_cast<int>(finalize(comm));
        if (r != 0) {
            (void)abort(comm);
            return r;
        }
    }
    return static_cast<int>(destroy(comm));
}

}  // namespace sparsenet::nccl
