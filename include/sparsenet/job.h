// Where this process stands in an MPI job, as the launcher's environment says (mpirun, srun):
// for programs that run the library under a launcher, as `sparsenet train` does, to split their
// datasets by rank, write files from one rank and label their messages. None of these initialises
// MPI, so they are safe to call before deciding whether to use it.
//
// Ending the whole job after one rank fails is the program's decision, not the library's (the
// library throws sparsenet::Error and never ends the process): the CLI calls MPI_Abort itself.
#pragma once

#include <string>

namespace sparsenet {

// True when the environment says an MPI launcher (mpirun, srun) started this process with more
// than one rank (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_SIZE > 1).
bool launched_with_mpi();

// This process's rank and the job's size as the launcher's environment says (0 and 1 without
// one).
int job_rank();
int job_size();

// " (rank R of N)" when an MPI launcher started this process with more than one rank, else "".
std::string job_rank_label();

}  // namespace sparsenet
