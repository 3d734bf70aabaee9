// Where this process stands in an MPI job, from the launcher's environment
// (include/sparsenet/job.h). Ending the job after a failure is the program's part
// (tools/common.cpp).
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "comm/communicator.h"

namespace sparsenet {

namespace {

int env_int(std::initializer_list<const char*> names, int fallback) {
    for (const char* name : names) {
        const char* v = std::getenv(name);
        if (v != nullptr && *v != '\0') return std::atoi(v);
    }
    return fallback;
}

}  // namespace

int job_rank() {
    return env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}, 0);
}

int job_size() {
    return env_int({"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}, 1);
}

std::string job_rank_label() {
    if (!launched_with_mpi()) return "";
    for (const char* rank_var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
        const char* rank = std::getenv(rank_var);
        if (rank == nullptr) continue;
        for (const char* size_var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
            const char* size = std::getenv(size_var);
            if (size != nullptr) return std::string(" (rank ") + rank + " of " + size + ")";
        }
        return std::string(" (rank ") + rank + ")";
    }
    return "";
}

}  // namespace sparsenet
