// What the executor is given: one rank's run of one Program (a Work), a rank's sequence of them
// (a Task), where it finds its links (ConnectionSource) and, where ranks share cores, whom it
// shares its core with (CoreSharing). Plain data; src/core fills it, src/exec runs it.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "src/common/datatype.h"
#include "src/common/doorbell.h"
#include "src/common/error.h"
#include "src/common/tuning.h"
#include "src/plan/plan.h"
#include "transports/base/connection.h"

namespace weft::exec {

// Where the executor gets the link to a peer on a channel (connected lazily by the owner).
class ConnectionSource {
 public:
  virtual ~ConnectionSource() = default;
  virtual transport::Connection* connection(int peer, int channel) = 0;  // may throw weft::Error
};

// Whether and how a Work runs on the interpreter's fast path (see lowerStraight in lower.h):
// kept while the Work's stamp stays.
struct StraightShape {
  // Most sends a straight call makes: a rank that only sends (a broadcast's root sending every
  // copy itself) may make several, an exchange one.
  static constexpr size_t kMaxSends = 8;
  uint64_t stamp = 0;  // of the Work it was derived for; 0: none
  bool straight = false;
  bool exchange = false;
  uint32_t sendLane = 0;  // an exchange's
  uint32_t sends = 0;
  std::array<const plan::Step*, kMaxSends> send{};  // in program order
  std::array<transport::Connection*, kMaxSends> out{};
  const plan::Step* recv = nullptr;
  transport::Connection* in = nullptr;
  bool sharedCores = false;  // polls once for a message or slot instead of briefly
};

// One rank's run of one Program.
struct Work {
  std::shared_ptr<const plan::Plan> plan;  // keeps `program` alive
  const plan::Program* program = nullptr;
  int rank = 0;
  std::vector<char*> buffers;  // indexed by plan buffer id (kInput, kOutput, kScratch, kExtra+i)
  DataType type = DataType::kFloat32;
  // The call's operator as lowerOperator (lower.h) leaves it, the one place Avg and PreMulSum
  // handles are rewritten: Sum, Prod, Max, Min or PreMulSum (never Avg), with PreMulSum's factor
  // applied to reads of kInput, and for Avg on integers the division after the run:
  // Output[0, divideCount) /= divisor (divisor 0: none). The executor and the device encoding
  // (src/cuda/device_plan.h) both run exactly this.
  RedOp op = RedOp::kSum;
  Scalar scalar;
  uint64_t divisor = 0;
  uint64_t divideCount = 0;
  std::vector<uint32_t> laneTags;  // tag each lane's messages carry (mismatch detection)
  uint32_t planTag = 0;            // the part of the tags naming a library plan
  ConnectionSource* conns = nullptr;
  const std::atomic<bool>* abort = nullptr;
  // The communicator's tuning (thresholds of lowering); null: Tuning's defaults.
  const Tuning* tuning = nullptr;
  std::function<void()> finish;     // runs on completion, after the division
  std::shared_ptr<void> keep;       // scratch memory and other per-run state
  std::vector<char> inlineScratch;  // small scratch, kept when the Work is reused
  // Send large slices by reference. Off when a buffer this Work sends from overlaps one it
  // receives into outside the plan's own ordering (e.g. an in-place ncclSend/ncclRecv pair): a
  // receive there would wait for the peer to read, while the peer waits the same way.
  bool byReference = true;
  // Names what the Work holds (nextWorkStamp()), kept while its owner runs it again unchanged
  // but for tags (a repeated call): the executor then keeps what it lowered from it, links
  // included. 0: unnamed, lowered anew every run.
  uint64_t stamp = 0;
  // Lanes (bit l: lane l) whose every step already ran elsewhere (the fast path sent a message
  // and leaves the rest of the call to run()): they start finished, and steps waiting on them go.
  uint64_t lanesDone = 0;
  StraightShape straight;
};

// A stamp no Work of this process had before.
uint64_t nextWorkStamp();

// buffers may point into inlineScratch: a Work must be moved, never copied, once filled.
static_assert(std::is_nothrow_move_constructible_v<Work>, "vectors of Work must move them");

// A pinned rank's view of the host's ranks where they outnumber the cores: whom it shares its
// core with, and every local rank's doorbell, whose parking tells whether that rank can move on
// (Doorbell::park). A waiting rank yields its core only where that may help (src/exec/wait.cc).
struct CoreSharing {
  std::vector<Doorbell*> mates;  // doorbells of the other ranks pinned to this core
  std::vector<Doorbell*> bells;  // by rank: a rank of this host's doorbell (null: self, elsewhere)
  std::vector<uint8_t> mate;     // by rank: 1 for the ranks pinned to this core
};

// A sequence of Works of one rank, run in order.
struct Task {
  std::vector<Work> units;
  Doorbell* bell = nullptr;  // the rank's doorbell (rung by peers)
  // Where ranks share cores: who shares this rank's (see wait.cc); null otherwise.
  const CoreSharing* cores = nullptr;
  // The communicator's tuning (waiting policy); null: Tuning's defaults.
  const Tuning* tuning = nullptr;
};

struct RunResult {
  Status status = Status::kSuccess;
  std::string message;
  int failedTask = -1;
  // The rank whose failure made the task fail, where known: a peer that died, or the rank a
  // failed peer named when it poisoned its links; -1: the failing rank itself (a timeout, an
  // abort, a mismatch it saw).
  int causeRank = -1;
};

}  // namespace weft::exec
