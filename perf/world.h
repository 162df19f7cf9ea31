// Where this process sits among the processes of one perf run, and how they share the unique id.
#pragma once

#include <string>

#include "nccl.h"
#include "weft/weft.h"

namespace weft::perf {

struct ProcessWorld {
  int index = 0;  // this process among the launched ones
  int count = 1;
  std::string source;  // which environment variables said so ("" when run alone)
};

// Reads WEFT_RANK/WEFT_WORLD_SIZE, else torchrun's RANK/WORLD_SIZE, else Open MPI's
// OMPI_COMM_WORLD_RANK/SIZE, else PMI_RANK/PMI_SIZE, else srun's SLURM_PROCID and
// SLURM_STEP_NUM_TASKS (the order weftGetUniqueIdFromEnv reads them in). Throws
// std::runtime_error on nonsense.
ProcessWorld discoverWorld();

// The id every process derives from its launcher's environment (weftGetUniqueIdFromEnv: MASTER_ADDR
// and MASTER_PORT, or srun's job step), with no file shared; process 0 serves the rendezvous.
// Throws std::runtime_error when it fails or names another rank or size than `world`.
ncclUniqueId deriveUniqueId(const ProcessWorld& world);

// Process 0 creates the id and publishes it at `path` (write to a temporary, then rename);
// the others poll for the file up to timeoutSec. Throws std::runtime_error on failure.
ncclUniqueId shareUniqueId(const ProcessWorld& world, const std::string& path, double timeoutSec);

}  // namespace weft::perf
