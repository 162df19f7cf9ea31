// The collective correctness grid of the core multiproc tests, as a function a test process (a
// forked child or a process started in a network namespace) runs on its ranks; and a fork
// launcher with per-process environment, for grids over tcp and simulated hosts.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nccl.h"

namespace weft::test {

// Every collective, four types, counts 0/1/7/40009, in and out of place, then the other ops;
// this process's `ranks` of `n`, driven by `comms`. Returns 0, or 1 after printing the first
// failure to stderr. `label` prefixes the failure line.
int correctnessGrid(const std::vector<ncclComm_t>& comms, const std::vector<int>& ranks, int n,
                    const std::string& label = "");

using RankBody = std::function<int(const std::vector<ncclComm_t>&, const std::vector<int>&, int)>;

// Forks `procs` processes holding `perProc` consecutive ranks each. `setup(p)` runs first in
// child p (set its environment there). Returns the exit codes (124: killed at the timeout,
// 90/91: init failed).
std::vector<int> forkRanks(int procs, int perProc, const RankBody& body,
                           const std::function<void(int)>& setup, int timeoutSec = 240);

}  // namespace weft::test
