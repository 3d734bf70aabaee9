// The one-rank communicator (local_communicator.h).
#include "comm/local_communicator.h"

#include <string>

#include "backend/backend.h"
#include "sparsenet/error.h"

namespace sparsenet {

void LocalCommunicator::copy(const void* send, void* recv, size_t count, CommType type) {
    if (send == recv || count == 0) return;
    backend_.copy(recv, send, count * comm_type_size(type));
}

void LocalCommunicator::check_root(const char* what, int root) {
    if (root != 0) {
        throw Error(ErrorCategory::kUsage, std::string(what) + " root " + std::to_string(root) +
                                               " out of range: the local communicator has 1 rank");
    }
}

void LocalCommunicator::all_gather(const void* send, void* recv, size_t count, CommType type) {
    copy(send, recv, count, type);
}

void LocalCommunicator::reduce_scatter(const void* send, void* recv, size_t count, CommType type,
                                       CommOp op) {
    copy(send, recv, count, type);
}

void LocalCommunicator::broadcast(void* data, size_t count, CommType type, int root) {
    check_root("broadcast", root);
}

void LocalCommunicator::gather(const void* send, void* recv, size_t count, CommType type,
                               int root) {
    check_root("gather", root);
    copy(send, recv, count, type);
}

}  // namespace sparsenet
