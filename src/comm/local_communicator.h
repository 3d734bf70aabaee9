// The one-rank communicator: what a process that was not started by an MPI launcher uses, so
// that model-parallel code runs unchanged with P = 1. Gathers and reduce_scatter copy the send
// block to the receive buffer (backend.copy, so it works on any backend's memory); reductions
// and broadcasts of one rank leave the data as it is; barrier returns at once.
#pragma once

#include "comm/communicator.h"

namespace sparsenet {

class LocalCommunicator final : public Communicator {
  public:
    // Copies go through `backend` (host or device memory); it must outlive the communicator.
    explicit LocalCommunicator(Backend& backend) : backend_(backend) {}

    int rank() const override { return 0; }
    int size() const override { return 1; }
    std::string name() const override { return "local"; }

    void all_gather(const void* send, void* recv, size_t count, CommType type) override;
    void reduce_scatter(const void* send, void* recv, size_t count, CommType type,
                        CommOp op) override;
    void all_reduce(void* data, size_t count, CommType type, CommOp op) override {}
    void broadcast(void* data, size_t count, CommType type, int root) override;
    void gather(const void* send, void* recv, size_t count, CommType type, int root) override;
    void barrier() override {}

  private:
    void copy(const void* send, void* recv, size_t count, CommType type);
    static void check_root(const char* what, int root);

    Backend& backend_;
};

}  // namespace sparsenet
