// comm_type_size, launched_with_mpi and the communicator registry (make_communicator).
#include "comm/communicator.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "backend/backend.h"
#include "comm/local_communicator.h"
#include "comm/mpi_communicator.h"
#include "sparsenet/error.h"

#ifdef SPARSENET_WITH_NCCL
#include "comm/nccl_communicator.h"
#endif

namespace sparsenet {

size_t comm_type_size(CommType type) {
    switch (type) {
        case CommType::kFloat32:
            return 4;
        case CommType::kFloat64:
            return 8;
        case CommType::kUint32:
            return 4;
        case CommType::kUint64:
            return 8;
        case CommType::kByte:
            return 1;
    }
    throw Error(ErrorCategory::kInternal,
                "unknown CommType " + std::to_string(static_cast<int>(type)));
}

bool launched_with_mpi() {
    // Open MPI's mpirun, then the PMI/PMIx variables that srun and MPICH's launchers set.
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
        const char* value = std::getenv(name);
        if (value == nullptr || *value == '\0') continue;
        char* end = nullptr;
        errno = 0;
        const long n = std::strtol(value, &end, 10);
        if (errno == 0 && *end == '\0' && n > 1) return true;
    }
    return false;
}

std::shared_ptr<Communicator> make_communicator(const std::string& kind, Backend& backend) {
    std::string k = kind;
    std::transform(k.begin(), k.end(), k.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    const std::string device = backend.name();
    const bool cuda = device.rfind("cuda", 0) == 0;
    if (k == "auto") {
        if (!launched_with_mpi()) return std::make_shared<LocalCommunicator>(backend);
#ifdef SPARSENET_WITH_NCCL
        // NCCL when its library loads on this machine; MPI (staging through host memory) else.
        if (cuda && nccl::available(nullptr)) return nccl::make_communicator(backend);
#endif
        return std::make_shared<MpiCommunicator>(backend);
    }
    if (k == "local") return std::make_shared<LocalCommunicator>(backend);
    // Outside an MPI launcher this is MPI's singleton mode: one rank.
    if (k == "mpi") return std::make_shared<MpiCommunicator>(backend);
    if (k == "nccl") {
#ifdef SPARSENET_WITH_NCCL
        if (!cuda) {
            throw Error(ErrorCategory::kUsage,
                        "communicator \"nccl\" needs the CUDA backend (device cuda[:N]), but this "
                        "process runs on \"" +
                            device + "\": use \"mpi\" or \"auto\"");
        }
        return nccl::make_communicator(backend);
#else
        (void)cuda;
        throw Error(ErrorCategory::kUsage,
                    "communicator \"nccl\" is not available: this build has no NCCL (it was built "
                    "without CUDA, or nccl.h was not found): use \"mpi\" or \"auto\"");
#endif
    }
    throw Error(ErrorCategory::kUsage,
                "unknown communicator \"" + kind + "\": expected auto, local, mpi or nccl");
}

}  // namespace sparsenet
