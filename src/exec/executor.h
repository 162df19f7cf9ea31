// The host executor: drives the lanes of one or more rank Programs as non-blocking state
// machines from a single thread, over Connections, with spin-then-sleep waiting.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "src/common/datatype.h"
#include "src/common/error.h"
#include "src/common/futex.h"
#include "src/plan/plan.h"
#include "transports/base/connection.h"

namespace weft::exec {

// Where the executor gets the link to a peer on a channel (connected lazily by the owner).
class ConnectionSource {
 public:
  virtual ~ConnectionSource() = default;
  virtual transport::Connection* connection(int peer, int channel) = 0;  // may throw weft::Error
};

// What runStraight derived from a Work (kept while the Work's stamp stays).
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
};

// One rank's run of one Program.
struct Work {
  std::shared_ptr<const plan::Plan> plan;  // keeps `program` alive
  const plan::Program* program = nullptr;
  int rank = 0;
  std::vector<char*> buffers;              // indexed by plan buffer id (kInput, kOutput, kScratch, kExtra+i)
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;                  // Sum, Prod, Max, Min or PreMulSum
  Scalar scalar;                           // PreMulSum factor applied to reads of kInput
  std::vector<uint32_t> laneTags;          // tag each lane's messages carry (mismatch detection)
  uint32_t planTag = 0;                    // the part of the tags naming a library plan
  ConnectionSource* conns = nullptr;
  const std::atomic<bool>* abort = nullptr;
  std::function<void()> finish;            // runs on completion (e.g. integer Avg division)
  std::shared_ptr<void> keep;              // scratch memory and other per-run state
  std::vector<char> inlineScratch;         // small scratch, kept when the Work is reused
  // Send large slices by reference. Off when a buffer this Work sends from overlaps one it
  // receives into outside the plan's own ordering (e.g. an in-place ncclSend/ncclRecv pair): a
  // receive there would wait for the peer to read, while the peer waits the same way.
  bool byReference = true;
  // Names what the Work holds (nextWorkStamp()), kept while its owner runs it again unchanged
  // but for tags (a repeated call): the executor then keeps what it derived from it, links
  // included. 0: unnamed, derived anew every run.
  uint64_t stamp = 0;
  // Lanes (bit l: lane l) whose every step already ran elsewhere (runStraight sent a message and
  // leaves the rest of the call to run()): they start finished, and steps waiting on them go.
  uint64_t lanesDone = 0;
  StraightShape straight;
};

// A stamp no Work of this process had before.
uint64_t nextWorkStamp();

// buffers may point into inlineScratch: a Work must be moved, never copied, once filled.
static_assert(std::is_nothrow_move_constructible_v<Work>, "vectors of Work must move them");

// A pinned rank's view of the host's ranks where they outnumber the cores: whom it shares its
// core with, and every local rank's doorbell, whose parking tells whether that rank can move on
// (Doorbell::park). A waiting rank yields its core only where that may help (run()).
struct CoreSharing {
  std::vector<Doorbell*> mates;  // doorbells of the other ranks pinned to this core
  std::vector<Doorbell*> bells;  // by rank: a rank of this host's doorbell (null: self, elsewhere)
  std::vector<uint8_t> mate;     // by rank: 1 for the ranks pinned to this core
};

// A sequence of Works of one rank, run in order.
struct Task {
  std::vector<Work> units;
  Doorbell* bell = nullptr;  // the rank's doorbell (rung by peers)
  // Where ranks share cores: who shares this rank's (see run()); null otherwise.
  const CoreSharing* cores = nullptr;
};

struct RunResult {
  Status status = Status::kSuccess;
  std::string message;
  int failedTask = -1;
};

// Slices each lane of `program` may move per pass of the executor over its lanes: 16 for every
// lane when all shares are equal (the fairness burst), else in proportion to plan::Lane::share,
// the smallest share getting 16 (at most 1024 a pass). So where lanes contend for one thread's
// time (the copies and reductions of all lanes run on it), each gets its share of it.
std::vector<uint32_t> laneBursts(const plan::Program& program);

// Smallest slice a send passes by reference (the receiver copies it out of the sender's memory)
// rather than by copy through a slot: WEFT_RDV_BYTES, or by default 4 KiB while every rank of
// this process's communicators has a core and 32 KiB once ranks outnumber the cores, or where
// the call writes again what it sends (`rewritesWhatItSends`: an in-place allreduce).
size_t rendezvousBytes(bool rewritesWhatItSends);

// What a copy collective's rank touches (its output, and an input of its own beside it), as it
// weighs against WEFT_STREAM_BYTES: the threshold was found with 2 ranks on the host, and the
// host's ranks share its caches, so with more of them (ranksOnHost) each rank's bytes count
// ranks/2 times: what they touch together, split between two.
uint64_t copyFootprint(uint64_t touched);

// Slices this process's runs have stored straight into a receiver's landing so far (for tests
// and diagnostics: whether offers are taken up).
uint64_t landedSlices();

// What runs keep from one to the next (per-task lane state), so that a warm run allocates
// nothing. One per thread: run() without it uses a thread-local one; a caller that already holds
// per-thread state passes its own and saves the thread-local lookup on every call.
class RunScratch {
 public:
  RunScratch();
  ~RunScratch();
  RunScratch(const RunScratch&) = delete;
  RunScratch& operator=(const RunScratch&) = delete;
  struct States;

 private:
  friend RunResult run(std::vector<Task>&, std::chrono::milliseconds, RunScratch&);
  std::unique_ptr<States> states_;
};

// Runs `w` without the lane machinery, for repeated small calls (the caller knows the Work is
// unchanged but for its tag, `tag`), when its program is a few steps with no dependency on a
// later lane: local copies and reductions of at most 64 KiB and one send or one receive (plain
// or reducing) of at most 8 KiB, or both as an exchange whose send is a lane of its own, each of
// at most 2 KiB.
//   kNotRun:  nothing was done (a slot not free, a message not there after a brief wait, or
//             another shape): run() the Work as usual.
//   kDone:    the call is complete.
//   kSent:    an exchange's send went out but its message has not come: the Work's laneTags
//             are `tag` and its lanesDone names the send's lane; run() it, then clear lanesDone.
// May throw where connection() does (before anything is done).
enum class Straight { kNotRun, kDone, kSent };
Straight runStraight(Work& w, uint32_t tag);

// Runs all tasks to completion, interleaving them; returns the first error (other tasks are then
// abandoned). `timeout` bounds any stretch without progress.
RunResult run(std::vector<Task>& tasks, std::chrono::milliseconds timeout);
RunResult run(std::vector<Task>& tasks, std::chrono::milliseconds timeout, RunScratch& scratch);

}  // namespace weft::exec
