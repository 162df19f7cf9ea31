// The collective correctness grid as a standalone program, for ranks started anywhere (inside
// network namespaces, by a script or a launcher). Environment:
//   WEFT_RANK, WEFT_WORLD_SIZE   this process's index and the number of processes
//   WEFT_RANKS_PER_PROC          ranks this process holds (default 1): ranks index*k .. index*k+k-1
//   WEFT_ID_FILE                 where process 0 publishes the unique id for the others
// Exit status 0 when every check passed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/support/grid.h"

namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

bool shareId(int index, const std::string& path, ncclUniqueId* id) {
  if (index == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return false;
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    std::ofstream(tmp, std::ios::binary).write(id->internal, sizeof(id->internal));
    return std::rename(tmp.c_str(), path.c_str()) == 0;
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(id->internal, sizeof(id->internal))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

int main() {
  const int index = envInt("WEFT_RANK", 0), procs = envInt("WEFT_WORLD_SIZE", 1);
  const int perProc = envInt("WEFT_RANKS_PER_PROC", 1);
  const char* file = std::getenv("WEFT_ID_FILE");
  if (!file || index < 0 || index >= procs || perProc < 1) {
    std::fprintf(stderr, "grid_main: set WEFT_RANK, WEFT_WORLD_SIZE and WEFT_ID_FILE\n");
    return 2;
  }
  ncclUniqueId id;
  if (!shareId(index, file, &id)) {
    std::fprintf(stderr, "grid_main %d: no unique id at %s\n", index, file);
    return 3;
  }
  const int n = procs * perProc;
  std::vector<ncclComm_t> comms(perProc);
  std::vector<int> ranks;
  ncclGroupStart();
  for (int j = 0; j < perProc; ++j) {
    ranks.push_back(index * perProc + j);
    if (ncclCommInitRank(&comms[j], n, id, index * perProc + j) != ncclSuccess) return 4;
  }
  if (ncclGroupEnd() != ncclSuccess) {
    std::fprintf(stderr, "grid_main %d: init failed: %s\n", index, "see the log above");
    return 4;
  }
  const char* host = std::getenv("WEFT_HOST_ID");
  int code = weft::test::correctnessGrid(comms, ranks, n, std::string(host ? host : "") + " ");
  for (auto c : comms) ncclCommDestroy(c);
  if (code == 0 && index == 0) std::printf("grid passed: %d ranks in %d processes\n", n, procs);
  return code;
}
