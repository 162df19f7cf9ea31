// Launching the direct peer-memory collectives (src/cuda/direct_kernels.h): which calls they
// take, their launch configuration (one pure function of the call, the same on every rank), and
// the kernel weftDirect found in the module the device interpreter's image was loaded into.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "src/common/datatype.h"
#include "src/common/tuning.h"
#include "src/cuda/direct_primitives.h"
#include "src/cuda/driver_api.h"
#include "src/plan/plan.h"

namespace weft::cuda {

// What decides a direct call's configuration: the call and where its ranks run.
struct DirectQuery {
  plan::Collective coll = plan::Collective::kAllReduce;
  uint64_t count = 0;  // elements, per rank as the NCCL call counts them
  DataType type = DataType::kFloat32;
  int nranks = 1;
  int smCount = 1;            // multiprocessors of the GPU
  int ranksOnGpu = 1;         // the communicator's ranks on that GPU (they share its SMs)
  uint32_t slotsPerRank = 0;  // mailbox slots per rank: the most blocks a rank may use
};

struct DirectShape {
  uint32_t blocks = 0;  // per rank; 0: nothing to launch (count 0)
  uint32_t threads = kDirectThreads;
  DirectAlgo algo = DirectAlgo::kTwoShot;  // allreduce's split
};

// The launch configuration, a pure function of the query and the tuning (so the same on every
// rank): allreduce one-shot up to t.directOneShotBytes of data, two-shot above; blocks per rank
// as many as the GPU's SMs shared among the ranks on it, but no more than one per
// t.directBlockBytes of the rank's share of the data, at least one, at most slotsPerRank.
DirectShape directShape(const DirectQuery& q, const Tuning& t);

// The direct kernel of a loaded module (the interpreter's image carries both kernels).
class DirectKernel {
 public:
  // Finds weftDirect in `module`. Null, with `why` set, where the image lacks it.
  static std::unique_ptr<DirectKernel> find(const DriverApi& api, CuModule module,
                                            std::string* why);

  // Queues the launch on `stream`: p.ranks * p.blocks blocks of `threads` threads. Nothing is
  // queued for zero blocks or ranks. CUDA_ERROR_INVALID_VALUE, queueing nothing, for a launch
  // the kernel cannot run: more than kMaxDirectLaunchRanks ranks in the launch or
  // kMaxDirectRanks in the call, blocks past the mailbox, a rank out of range, an unsupported
  // collective, type or operator, no mailbox, or more than kDirectThreads threads.
  CuResult launch(const DirectLaunch& p, CuStream stream, uint32_t threads = kDirectThreads) const;

 private:
  DirectKernel() = default;
  const DriverApi* api_ = nullptr;
  void* function_ = nullptr;  // CUfunction
};

}  // namespace weft::cuda
