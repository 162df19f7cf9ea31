#include "perf/mpi.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#ifdef WEFT_PERF_MPI
#include <mpi.h>
#endif

namespace weft::perf {
namespace {
bool gActive = false;

// Variables MPI launchers put in each process's environment. srun puts PMI_SIZE or PMIX_RANK
// there only with --mpi=pmi2/pmix; a plain srun (SLURM_PROCID alone) gives MPI nothing to start
// from, and the tools then rendezvous through the job step (deriveUniqueId).
bool underMpiLauncher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}
}  // namespace

#ifdef WEFT_PERF_MPI

bool mpiStart(int* argc, char*** argv, ProcessWorld* world) {
  // weftrun's own variables win: they mean weftrun, not MPI, placed this process.
  if (std::getenv("WEFT_ID_FILE") || !underMpiLauncher()) return false;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    throw std::runtime_error("MPI_Init_thread failed");
  gActive = true;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  world->index = rank;
  world->count = size;
  world->source = "MPI_COMM_WORLD";
  return true;
}

bool mpiShareUniqueId(const ProcessWorld& world, ncclUniqueId* id) {
  if (!gActive) return false;
  int ok = 1;
  if (world.index == 0) ok = ncclGetUniqueId(id) == ncclSuccess;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) throw std::runtime_error("ncclGetUniqueId failed on process 0");
  MPI_Bcast(id->internal, static_cast<int>(sizeof(id->internal)), MPI_BYTE, 0, MPI_COMM_WORLD);
  return true;
}

void mpiStop() {
  if (gActive) MPI_Finalize();
  gActive = false;
}

#else

bool mpiStart(int*, char***, ProcessWorld*) {
  (void)underMpiLauncher;
  return false;
}
bool mpiShareUniqueId(const ProcessWorld&, ncclUniqueId*) { return false; }
void mpiStop() {}

#endif

}  // namespace weft::perf
