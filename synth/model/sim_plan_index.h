// The simulator's tables of a plan laid out on a fabric (synth/model/simulator.h): one LaneState
// per lane, one StepInfo per step (global ids, lane by lane), one Fifo per (sender, receiver,
// channel). indexPlan validates the plan against the fabric while it builds them, so the event
// loop can trust every peer, dependency, channel and route it reads. Internal to synth/model.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "src/plan/plan.h"
#include "synth/model/fabric.h"
#include "synth/model/sim_options.h"

namespace weft::synth::sim {

enum class Wait : uint8_t { kNone, kLane, kDependency, kData, kSlot };

// The name of what a step waited for, as CriticalStep::waitedFor spells it.
const char* waitName(Wait w);

// "rank r lane l step s (op from/to rank p, n elements)", for error messages.
std::string stepText(int rank, int lane, int step, const plan::Step& s);

struct Entry {      // one slice in a FIFO slot
  int sender = -1;  // global step id
  uint64_t msgCount = 0;
  bool arrived = false;
};

struct Fifo {
  int from = 0, to = 0, channel = 0;
  std::deque<Entry> q;  // occupied slots, oldest first
  uint64_t popped = 0;  // entries consumed so far (absolute index of q.front())
  int waitingSender = -1, waitingReceiver = -1;  // lanes blocked on this FIFO
  int sendingStep = -1, receivingStep = -1;      // the last steps that used it (global ids)
  double latencyUs = 0;
  const std::vector<int>* route = nullptr;
};

enum class Phase : uint8_t { kReady, kBlocked, kBusy, kDone };

struct LaneState {
  int rank = 0, lane = 0;
  int firstStep = 0, steps = 0;  // global ids firstStep .. firstStep + steps - 1
  int cur = 0;                   // index within the lane
  bool started = false, overheadDone = false, localDone = false;
  uint64_t slice = 0;
  uint32_t weight = 1;   // the lane's share of link bandwidth (Lane::share)
  uint64_t sending = 0;  // absolute FIFO index of the slice being sent
  Phase phase = Phase::kReady;
};

struct StepInfo {
  const plan::Step* step = nullptr;
  int lane = 0;  // global lane index
  int index = 0;
  int sendFifo = -1, recvFifo = -1;
  uint64_t bytes = 0, nslices = 1;
  bool done = false;
  double startUs = 0, endUs = 0;
  int blocker = -1;
  Wait why = Wait::kNone;
  std::vector<int> depWaiters;  // lanes waiting for this step to finish
};

struct PlanIndex {
  std::vector<LaneState> lanes;  // every rank's lanes, rank by rank
  std::vector<int> laneBase;     // per rank: the index of its first lane in `lanes`
  std::vector<StepInfo> steps;   // global step ids
  std::vector<Fifo> fifos;
  bool weighted = false;  // some lane's weight is not 1
  // stepText of global step g.
  std::string describe(int g) const;
};

// Throws weft::Error(kInvalidArgument) "simulate <algorithm>: <msg>".
[[noreturn]] void rejectPlan(const plan::Plan& plan, const std::string& msg);

// Lays `plan` out on `fabric` and validates it (see simulate in synth/model/simulator.h for
// what is rejected, short of deadlocks and message size mismatches, found while simulating).
PlanIndex indexPlan(const plan::Plan& plan, const Fabric& fabric, const SimOptions& options);

}  // namespace weft::synth::sim
